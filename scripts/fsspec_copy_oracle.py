import fsspec
import tempfile
import os
import json

fs = fsspec.filesystem("file", auto_mkdir=True)
base_files = [
    "file1",
    "file2",
    "subdir/subfile1",
    "subdir/subfile2",
    "subdir/nesteddir/nestedfile",
]
S = [
    (
        "file_to_existing_dir",
        "source/subdir/subfile1",
        "target/",
        False,
        None,
        True,
        [],
    ),
    (
        "file_to_existing_dir_no_slash",
        "source/subdir/subfile1",
        "target",
        False,
        None,
        True,
        [],
    ),
    (
        "file_to_new_dir",
        "source/subdir/subfile1",
        "target/newdir/",
        False,
        None,
        False,
        [],
    ),
    (
        "file_to_file_in_existing_dir",
        "source/subdir/subfile1",
        "target/newfile",
        False,
        None,
        True,
        [],
    ),
    (
        "file_to_file_in_new_dir",
        "source/subdir/subfile1",
        "target/newdir/newfile",
        False,
        None,
        False,
        [],
    ),
    (
        "dir_to_existing_dir_not_recursive",
        "source/subdir",
        "target/",
        False,
        None,
        True,
        [],
    ),
    ("dir_to_existing_dir", "source/subdir", "target/", True, None, True, []),
    ("dir_slash_to_existing_dir", "source/subdir/", "target/", True, None, True, []),
    ("dir_to_existing_dir_maxdepth", "source/subdir", "target", True, 1, True, []),
    ("dir_to_new_dir", "source/subdir", "target/newdir/", True, None, False, []),
    ("dir_slash_to_new_dir", "source/subdir/", "target/newdir", True, None, False, []),
    (
        "dir_to_new_dir_not_recursive",
        "source/subdir",
        "target/newdir/",
        False,
        None,
        False,
        [],
    ),
    ("glob_to_existing_dir", "source/subdir/*", "target/", False, None, True, []),
    (
        "glob_to_existing_dir_recursive",
        "source/subdir/*",
        "target/",
        True,
        None,
        True,
        [],
    ),
    ("glob_to_existing_dir_maxdepth", "source/subdir/*", "target/", True, 1, True, []),
    ("glob_to_new_dir", "source/subdir/*", "target/newdir/", True, None, False, []),
    ("glob_star1", "source/subdir/*1", "target/", False, None, True, []),
    ("glob_qmark", "source/subdir/subfile?", "target/", False, None, True, []),
    ("glob_class", "source/subdir/subfile[1-2]", "target/", False, None, True, []),
    ("glob_doublestar", "source/subdir/**", "target/", False, None, True, []),
    ("glob_doublestar_recursive", "source/subdir/**", "target/", True, None, True, []),
    ("glob_doublestar_maxdepth", "source/subdir/**", "target/", True, 1, True, []),
    ("glob_single_file", "source/subdir/subfile1*", "target/", False, None, True, []),
    (
        "list_to_existing_dir",
        ["source/file1", "source/file2", "source/subdir/subfile1"],
        "target/",
        False,
        None,
        True,
        [],
    ),
    (
        "list_to_new_dir",
        ["source/file1", "source/file2", "source/subdir/subfile1"],
        "target/newdir/",
        False,
        None,
        False,
        [],
    ),
    (
        "two_files_to_new_dir",
        ["source/file1", "source/file2"],
        "target/newdir",
        False,
        None,
        False,
        [],
    ),
    (
        "shared_name_prefix",
        "source/subdir",
        "target/",
        True,
        None,
        True,
        ["subdirx/other"],
    ),
]
out = []
for name, src, dst, rec, md, exists, extra in S:
    with tempfile.TemporaryDirectory() as d:
        for f in base_files + extra:
            p = os.path.join(d, "source", f)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(f)
        if exists:
            os.makedirs(os.path.join(d, "target"))
        s = (
            [os.path.join(d, x) for x in src]
            if isinstance(src, list)
            else os.path.join(d, src)
        )
        if isinstance(src, str) and src.endswith("/"):
            s = s if s.endswith("/") else s + "/"
        t = os.path.join(d, dst) + ("/" if dst.endswith("/") else "")
        kw = {} if md is None else {"maxdepth": md}
        fs.copy(s, t, recursive=rec, **kw)
        got = (
            sorted(
                os.path.relpath(p, os.path.join(d, "target"))
                for p in fs.find(os.path.join(d, "target"))
            )
            if os.path.exists(os.path.join(d, "target"))
            else []
        )
        out.append((name, src, dst, rec, md, exists, extra, got))
for o in out:
    print(json.dumps(o))
