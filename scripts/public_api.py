#!/usr/bin/env python3
"""The public API of a crate as one sorted line per item, from rustdoc's JSON.

    scripts/public_api.py target/doc/cairn_checkpoint.json > docs/public-api/cairn-checkpoint.txt

Each line is an item's path, its kind and, for functions, its signature;
trait implementations are listed under their type, auto traits and blanket
implementations left out. `scripts/public-api.sh` makes the JSON and
compares the listings with the ones in the repository, so a change to a
crate's public surface shows in review.
"""

from __future__ import annotations

import json
import sys
from typing import Any

Item = dict[str, Any]

# Traits the compiler implements with a derive, not a part of any API.
COMPILER_MARKERS = {"StructuralPartialEq", "StructuralEq"}

# The crate-qualified paths of items from other crates than the standard
# library's (filled by main), so a dependency's type in a signature shows.
EXTERNAL_PATHS: dict[str, str] = {}


class Listing:
    """Walks a crate's rustdoc JSON from its root module."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.index: dict[str, Item] = doc["index"]
        self.paths: dict[str, Any] = doc["paths"]
        self.root = str(doc["root"])
        self.lines: set[str] = set()

    def item(self, item_id: Any) -> Item | None:
        return self.index.get(str(item_id))

    def walk_module(self, module: Item, path: str) -> None:
        for child_id in module["inner"]["module"]["items"]:
            child = self.item(child_id)
            if child is None or child.get("visibility") != "public":
                continue
            kind, inner = next(iter(child["inner"].items()))
            if kind == "use":
                self.walk_use(child, inner, path)
            else:
                self.walk(child, f"{path}::{child['name']}")

    def walk_use(self, item: Item, use: dict[str, Any], path: str) -> None:
        target = self.item(use["id"]) if use["id"] is not None else None
        if target is None:
            # A re-export of another crate's item or of a whole crate.
            glob = "::*" if use["is_glob"] else ""
            self.lines.add(f"{path}::{use['name']} pub use {use['source']}{glob}")
        elif use["is_glob"]:
            self.walk_module(target, path)
        else:
            self.walk(target, f"{path}::{use['name']}")

    def walk(self, item: Item, path: str) -> None:
        kind, inner = next(iter(item["inner"].items()))
        if kind == "module":
            self.lines.add(f"{path} mod")
            self.walk_module(item, path)
        elif kind == "function":
            self.lines.add(f"{path} {signature(inner)}")
        elif kind in ("struct", "enum", "union"):
            self.lines.add(f"{path} {kind}{generics(inner['generics'])}")
            self.walk_type(item, kind, inner, path)
        elif kind == "trait":
            self.lines.add(f"{path} trait")
            for member_id in inner["items"]:
                member = self.item(member_id)
                if member is not None:
                    self.walk(member, f"{path}::{member['name']}")
        elif kind == "constant":
            self.lines.add(f"{path} const: {render(inner['type'])}")
        elif kind == "static":
            self.lines.add(f"{path} static: {render(inner['type'])}")
        elif kind == "type_alias":
            self.lines.add(f"{path} type = {render(inner['type'])}")
        elif kind == "assoc_type":
            self.lines.add(f"{path} type")
        elif kind == "assoc_const":
            self.lines.add(f"{path} const: {render(inner['type'])}")
        else:
            self.lines.add(f"{path} {kind}")

    def walk_type(
        self, item: Item, kind: str, inner: dict[str, Any], path: str
    ) -> None:
        if kind == "struct":
            shape = inner["kind"]
            fields = []
            if isinstance(shape, dict) and "plain" in shape:
                fields = shape["plain"]["fields"]
            elif isinstance(shape, dict) and "tuple" in shape:
                fields = [f for f in shape["tuple"] if f is not None]
            for field_id in fields:
                field = self.item(field_id)
                if field is not None and field.get("visibility") == "public":
                    self.lines.add(
                        f"{path}::{field['name']} field: {render(field['inner']['struct_field'])}"
                    )
        if kind == "enum":
            for variant_id in inner["variants"]:
                variant = self.item(variant_id)
                if variant is not None:
                    self.lines.add(f"{path}::{variant['name']} variant")
        for impl_id in inner["impls"]:
            impl_item = self.item(impl_id)
            if impl_item is None:
                continue
            impl = impl_item["inner"]["impl"]
            if impl["is_synthetic"] or impl["blanket_impl"] is not None:
                continue
            if impl["trait"] is not None:
                if impl["trait"]["path"] in COMPILER_MARKERS:
                    continue
                self.lines.add(f"{path} impl {render_path(impl['trait'])}")
                continue
            for member_id in impl["items"]:
                member = self.item(member_id)
                if member is not None and member.get("visibility") == "public":
                    self.walk(member, f"{path}::{member['name']}")


def generics(params: dict[str, Any]) -> str:
    names = [
        p["name"]
        for p in params["params"]
        if "lifetime" not in p["kind"]
        and not p["kind"].get("type", {}).get("is_synthetic")
    ]
    return f"<{', '.join(names)}>" if names else ""


def signature(function: dict[str, Any]) -> str:
    header = function["header"]
    words = [
        w
        for w, on in (
            ("const", header["is_const"]),
            ("async", header["is_async"]),
            ("unsafe", header["is_unsafe"]),
        )
        if on
    ]
    sig = function["sig"]
    inputs = []
    for name, ty in sig["inputs"]:
        inputs.append(render_self(ty) if name == "self" else f"{name}: {render(ty)}")
    out = f" -> {render(sig['output'])}" if sig["output"] is not None else ""
    return " ".join(
        words + [f"fn{generics(function['generics'])}({', '.join(inputs)}){out}"]
    )


def render_self(ty: dict[str, Any]) -> str:
    if "borrowed_ref" in ty and ty["borrowed_ref"]["type"] == {"generic": "Self"}:
        return "&mut self" if ty["borrowed_ref"]["is_mutable"] else "&self"
    if ty == {"generic": "Self"}:
        return "self"
    return f"self: {render(ty)}"


def render_path(path: dict[str, Any]) -> str:
    args = path.get("args")
    text = EXTERNAL_PATHS.get(str(path.get("id")), path["path"].rsplit("::", 1)[-1])
    if args and "angle_bracketed" in args:
        rendered = []
        for arg in args["angle_bracketed"]["args"]:
            if "type" in arg:
                rendered.append(render(arg["type"]))
            elif "lifetime" in arg:
                rendered.append(arg["lifetime"])
            elif "const" in arg:
                rendered.append(str(arg["const"].get("expr", "_")))
        for constraint in args["angle_bracketed"].get("constraints", []):
            binding = constraint.get("binding", {})
            if "equality" in binding and "type" in binding["equality"]:
                rendered.append(
                    f"{constraint['name']} = {render(binding['equality']['type'])}"
                )
        if rendered:
            text += f"<{', '.join(rendered)}>"
    elif args and "parenthesized" in args:
        inputs = ", ".join(render(t) for t in args["parenthesized"]["inputs"])
        output = args["parenthesized"]["output"]
        text += f"({inputs})" + (f" -> {render(output)}" if output else "")
    return text


def render_bounds(bounds: list[dict[str, Any]]) -> str:
    parts = []
    for bound in bounds:
        if "trait_bound" in bound:
            parts.append(render_path(bound["trait_bound"]["trait"]))
        elif "outlives" in bound:
            parts.append(bound["outlives"])
    return " + ".join(parts)


def render(ty: dict[str, Any] | None) -> str:
    if ty is None:
        return "()"
    kind, inner = next(iter(ty.items()))
    if kind == "resolved_path":
        return render_path(inner)
    if kind in ("generic", "primitive"):
        return inner
    if kind == "borrowed_ref":
        lifetime = f"{inner['lifetime']} " if inner["lifetime"] else ""
        mutable = "mut " if inner["is_mutable"] else ""
        return f"&{lifetime}{mutable}{render(inner['type'])}"
    if kind == "slice":
        return f"[{render(inner)}]"
    if kind == "array":
        return f"[{render(inner['type'])}; {inner['len']}]"
    if kind == "tuple":
        return f"({', '.join(render(t) for t in inner)})"
    if kind == "dyn_trait":
        traits = [render_path(t["trait"]) for t in inner["traits"]]
        if inner.get("lifetime"):
            traits.append(inner["lifetime"])
        return f"dyn {' + '.join(traits)}"
    if kind == "impl_trait":
        return f"impl {render_bounds(inner)}"
    if kind == "raw_pointer":
        return f"*{'mut' if inner['is_mutable'] else 'const'} {render(inner['type'])}"
    if kind == "qualified_path":
        return f"<{render(inner['self_type'])}>::{inner['name']}"
    if kind == "function_pointer":
        sig = inner["sig"]
        inputs = ", ".join(render(t) for _, t in sig["inputs"])
        out = f" -> {render(sig['output'])}" if sig["output"] else ""
        return f"fn({inputs}){out}"
    if kind == "infer":
        return "_"
    return kind


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        doc = json.load(file)
    for item_id, summary in doc["paths"].items():
        if summary["crate_id"] != 0 and summary["path"][0] not in (
            "core",
            "alloc",
            "std",
        ):
            EXTERNAL_PATHS[item_id] = "::".join(summary["path"])
    listing = Listing(doc)
    root = listing.index[listing.root]
    listing.lines.add(f"{root['name']} crate")
    listing.walk_module(root, root["name"])
    sys.stdout.write("".join(f"{line}\n" for line in sorted(listing.lines)))


if __name__ == "__main__":
    main()
