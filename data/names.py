"""Which theorems a program declares, by full name: the check that a row's ``name`` is its theorem.

Splits are theorem-disjoint by *row name* (``data.corpus.split_of``), so a row whose name is not
the theorem its program proves could put one program in train under its real name and in test
under another. ``name_mismatch`` catches that before Lean runs (an ``input_error`` row).

Full names follow Lean's rules as far as text shows them: ``namespace A.B`` ... ``end A.B`` scope
declarations (``section`` and ``mutual`` blocks also end with ``end`` but add no namespace); ``theorem _root_.x`` is ``x`` whatever the namespace;
``protected`` / ``private`` and attributes do not change the name; comments and string literals
are masked first (``leanloop.lean.acceptance.mask``). Names in the harness's own namespace
(``LeanloopHarness``) belong to the acceptance policy's harness, never to a candidate.
"""

from __future__ import annotations

import re

from leanloop.lean.acceptance import HARNESS_NAMESPACE, mask

# `theorem NAME`, `lemma NAME`, `namespace A.B`, `section [S]`, `end [A.B]`, as whole words
_SCOPE_OR_DECL = re.compile(
    r"(?<![\w.'])(?:(theorem|lemma)\s+([^\s({\[⦃:]+)|(namespace)\s+([^\s]+)|(section|mutual)(?![\w.'])"
    r"|(end)(?![\w.']))"
)


def declared_theorems(program: str) -> list[str]:
    """Full names of the ``theorem`` / ``lemma`` declarations of ``program``, in order."""
    text = mask(program).text
    scopes: list[tuple[str, list[str]]] = []  # ("namespace" | "section", namespace parts it adds)
    names: list[str] = []
    for m in _SCOPE_OR_DECL.finditer(text):
        if m.group(1):
            name = m.group(2).replace("«", "").replace("»", "")
            if name.startswith("_root_."):
                names.append(name.removeprefix("_root_."))
            else:
                prefix = [part for _, parts in scopes for part in parts]
                names.append(".".join([*prefix, name]))
        elif m.group(3):
            scopes.append(("namespace", m.group(4).split(".")))
        elif m.group(5):  # `section [S]` and `mutual` add no namespace but are closed by an `end`
            scopes.append((m.group(5), []))
        elif scopes:  # `end [A.B]`: closes the innermost scope
            scopes.pop()
    return names


def name_mismatch(name: str, program: str) -> str | None:
    """Why ``name`` is not a theorem ``program`` declares, or None when it is."""
    target = name.removeprefix("_root_.")
    if target == HARNESS_NAMESPACE or target.startswith(HARNESS_NAMESPACE + "."):
        return f"the name `{name}` is in the acceptance harness's reserved namespace `{HARNESS_NAMESPACE}`"
    declared = [
        n for n in declared_theorems(program) if n != HARNESS_NAMESPACE and not n.startswith(HARNESS_NAMESPACE + ".")
    ]
    if target in declared:
        return None
    if not declared:
        return f"the row names `{name}` but the program declares no theorem or lemma"
    shown = ", ".join(f"`{n}`" for n in declared[:5]) + (f" (+{len(declared) - 5} more)" if len(declared) > 5 else "")
    return f"the row names `{name}` but the program declares {shown}"
