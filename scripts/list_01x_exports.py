"""Prints the public names of a davincirunsdk 0.1.x release, one
``<module> <name>`` a line, for tests/python/repository/exports_0_1_5.txt.

    python3 scripts/list_01x_exports.py UNPACKED_WHEEL_DIR

UNPACKED_WHEEL_DIR holds the release's ``davincirunsdk/`` (e.g. the
davincirunsdk-0.1.5-py2.py3-none-any.whl from PyPI, unzipped). A module's
public names are its ``__all__`` when it has one, else every top-level
function, class and assigned name not starting with ``_`` (names it only
imports are left out); a module with none is listed as ``<module> -``."""

import ast
import os
import sys


def public_names(tree):
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(element) for element in node.value.elts]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
    return [name for name in names if not name.startswith("_")]


def main(root):
    rows = []
    for directory, _, files in os.walk(os.path.join(root, "davincirunsdk")):
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(directory, file)
            module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            if module.endswith(".__init__"):
                module = module[: -len(".__init__")]
            with open(path, encoding="utf-8") as f:
                names = public_names(ast.parse(f.read()))
            rows.extend("%s %s" % (module, name) for name in names) if names else rows.append(module + " -")
    print("\n".join(sorted(rows)))


if __name__ == "__main__":
    main(sys.argv[1])
