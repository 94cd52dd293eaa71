"""Composite keys (issue 60): the encoding gives two rows the same ID
exactly when their key tuples are equal (an integer the same whatever its
column's width and sign), checked against Python's tuples over drawn
rows; a missing key column, a null and a float are refused by name; the
ID column's forms; skip_committed once per dataset. Starts no Ray; runs in
the Ray virtualenv (scripts/test.sh's Python lane)."""

import pytest

pytest.importorskip("ray", reason="needs Ray 2.60: scripts/test.sh runs this in its ray-venv")

import pyarrow as pa  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cairn._ray_keys import KeyRefused, encode_key, key_name, parse_id_column  # noqa: E402

INT_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.uint64()]
BOUNDS = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint16(): (0, 2**16 - 1),
    pa.uint64(): (0, 2**64 - 1),
}


@st.composite
def keyed_tables(draw):
    """A table of 1-3 key columns (integers of drawn types, strings,
    binaries), its rows drawn from a small pool so equal keys occur."""
    kinds = draw(st.lists(st.sampled_from(["int", "str", "bin"]), min_size=1, max_size=3))
    columns, types = [], []
    for kind in kinds:
        if kind == "int":
            kind = draw(st.sampled_from(INT_TYPES))
            low, high = BOUNDS[kind]
            pool = st.sampled_from([low, high, 0, 1, 7]) | st.integers(low, high)
        elif kind == "str":
            kind = draw(st.sampled_from([pa.string(), pa.large_string()]))
            pool = st.sampled_from(["", "a", "ab", "a\x00b", "é"]) | st.text(max_size=6)
        else:
            kind = draw(st.sampled_from([pa.binary(), pa.large_binary()]))
            pool = st.sampled_from([b"", b"a", b"\x00", b"s\x00\x00\x00\x01a"]) | st.binary(
                max_size=6
            )
        types.append(kind)
        columns.append(pool)
    rows = draw(st.lists(st.tuples(*columns), min_size=1, max_size=30))
    names = [f"k{i}" for i in range(len(types))]
    table = pa.table(
        {n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types))}
    )
    return table, names, rows


def normal(value):
    """A key part as the encoding sees it: the type of a string or a
    binary matters, an integer's width and sign do not."""
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, bytes):
        return ("b", value)
    return ("i", value)


@settings(max_examples=300, deadline=None)
@given(keyed_tables())
def test_two_rows_share_an_id_exactly_when_their_keys_are_equal(drawn):
    table, names, rows = drawn
    ids = encode_key(table, names).to_pylist()
    assert len(ids) == len(rows)
    for i in range(len(rows)):
        for j in range(len(rows)):
            same_key = [normal(v) for v in rows[i]] == [normal(v) for v in rows[j]]
            assert (ids[i] == ids[j]) == same_key, (rows[i], rows[j])
    # The same values in chunks, or dictionary-encoded, give the same IDs.
    chunked = pa.concat_tables([table.slice(0, len(rows) // 2), table.slice(len(rows) // 2)])
    assert encode_key(chunked, names).to_pylist() == ids
    encoded = pa.table(
        {n: table[n].dictionary_encode() if i == 0 else table[n] for i, n in enumerate(names)}
    )
    assert encode_key(encoded, names).to_pylist() == ids


def test_an_integer_is_the_same_key_in_every_integer_column():
    for kind in INT_TYPES:
        one = pa.table({"v": pa.array(["x"]), "i": pa.array([7], kind)})
        assert encode_key(one, ["v", "i"]).to_pylist() == [b"s\x00\x00\x00\x01x+" + (7).to_bytes(8)]


def test_a_missing_column_a_null_and_a_float_are_refused_by_name():
    table = pa.table({"video": ["a", None], "t": [0.5, 1.5], "i": [1, 2]})
    with pytest.raises(KeyRefused, match="'shot_idx'.*skip_committed"):
        encode_key(table, ["i", "shot_idx"])
    with pytest.raises(KeyRefused, match="'video' holds a null"):
        encode_key(table, ["video", "i"])
    with pytest.raises(KeyRefused, match="'t' is of type double"):
        encode_key(table, ["i", "t"])


def test_the_id_columns_forms():
    assert parse_id_column("uid") == ("uid", None)
    assert parse_id_column(["uid"]) == ("uid", None)
    assert parse_id_column(("video", "shot_idx")) == (
        '["video","shot_idx"]',
        ["video", "shot_idx"],
    )
    assert key_name(["a", "b"]) == '["a","b"]'
    for bad in ["", [], ["a", "a"], ["a", ""], ["a", 3]]:
        with pytest.raises(ValueError, match="id_column"):
            parse_id_column(bad)


def test_skip_committed_is_refused_twice_on_one_dataset():
    import ray.data

    import cairn.ray

    once = cairn.ray.skip_committed(ray.data.range(10), concurrency=(1, 1))
    with pytest.raises(ValueError, match="call it once"):
        cairn.ray.skip_committed(once.map(lambda row: row), concurrency=(1, 1))


def test_lineage_markers_count_each_sources_outputs_across_units():
    """Two units of one job: a source whose outputs span both is complete
    only with both; a source of no outputs (its one row of count 0, not
    written) is complete; a partly written source is not; two counts of
    one source are refused, in a unit and across units."""
    from cairn._ray_keys import complete_sources, lineage_markers

    first = pa.table({"video": ["a", "a", "b", "z"], "shot_idx": [0, 1, 0, -1], "n": [3, 3, 2, 0]})
    second = pa.table({"video": ["a"], "shot_idx": [2], "n": [3]})
    markers_1, kept_1 = lineage_markers(first, "video", "n")
    markers_2, kept_2 = lineage_markers(second, "video", "n")
    assert kept_1.column("video").to_pylist() == ["a", "a", "b"]
    assert kept_2.num_rows == 1
    done, named = complete_sources(markers_1.to_pylist())
    assert sorted(done) == ["z"] and named == 3
    done, named = complete_sources(markers_1.to_pylist() + markers_2.to_pylist())
    assert sorted(done) == ["a", "z"] and named == 3
    # Keys are never taken for markers.
    keys = encode_key(first, ["video", "shot_idx"]).to_pylist()
    assert complete_sources(keys) == ([], 0)

    with pytest.raises(KeyRefused, match="disagree"):
        lineage_markers(pa.table({"video": ["a", "a"], "n": [3, 2]}), "video", "n")
    other, _ = lineage_markers(pa.table({"video": ["a"], "n": [4]}), "video", "n")
    with pytest.raises(KeyRefused, match="two output counts"):
        complete_sources(markers_1.to_pylist() + other.to_pylist())
    with pytest.raises(KeyRefused, match="'n' is not in the rows"):
        lineage_markers(pa.table({"video": ["a"]}), "video", "n")
    ints, _ = lineage_markers(pa.table({"v": pa.array([7, -2], pa.int32()), "n": [0, 0]}), "v", "n")
    assert sorted(complete_sources(ints.to_pylist())[0]) == [-2, 7]
