"""Part 5b of the shipped harness: test code's asserts, rewritten to record each and carry on.

Stdlib only; runs only in the trusted process T (and in the node, which compiles a
group's test blocks once for its workers: ``_warm.compile_block``).

>>> code, count = _compiled_block("assert 1 == 1\\nassert 1 == 2", 0)
>>> count
2
"""

from __future__ import annotations  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


#: Compiled test blocks by (source, index). A node's grading worker runs the same tests
#: for every member of a group, and compiling (parse, rewrite, compile) is a pure
#: function of the source; code objects are immutable and run in a fresh namespace.
_BLOCKS: dict[tuple[str, int], tuple[Any, int]] = {}
_BLOCKS_MAX = 512


def _compiled_block(source: str, index: int) -> tuple[Any, int]:
    """The test block's code (its asserts rewritten) and how many asserts it has."""
    key = (source, index)
    hit = _BLOCKS.get(key)
    if hit is None:
        import ast

        tree, static = _rewrite_asserts(ast.parse(source))
        hit = (compile(tree, f"<tests {index}>", "exec"), static)
        if len(_BLOCKS) >= _BLOCKS_MAX:
            _BLOCKS.pop(next(iter(_BLOCKS)))
        _BLOCKS[key] = hit
    return hit


def _rewrite_asserts(tree: Any) -> tuple[Any, int]:
    """``assert t, m`` -> record ``bool(t)`` (or the exception) and carry on; and how many.

    Asserts are statements, so only statement lists are walked (bodies,
    ``else``/``finally`` blocks, handlers and ``match`` cases), never the
    expressions: a fraction of a full ``NodeTransformer`` pass.
    """
    import ast

    count = 0

    def block(statements: list[Any]) -> list[Any]:
        nonlocal count
        out = []
        for node in statements:
            if isinstance(node, ast.Assert):
                count += 1
                out.append(_assert_to_check(ast, node))
                continue
            for name, value in ast.iter_fields(node):
                if not (isinstance(value, list) and value):
                    continue
                if isinstance(value[0], ast.stmt):
                    setattr(node, name, block(value))
                elif isinstance(value[0], (ast.excepthandler, ast.match_case)):
                    for part in value:
                        part.body = block(part.body)
            out.append(node)
        return out

    tree.body = block(tree.body)
    return tree, count


def _assert_to_check(ast: Any, node: Any) -> Any:
    # Every new node takes the assert's location, given to its constructor (ast.copy_location
    # per node cost more than the parse); the assert's own test keeps its location.
    at = {
        "lineno": node.lineno,
        "col_offset": node.col_offset,
        "end_lineno": node.end_lineno,
        "end_col_offset": node.end_col_offset,
    }

    def name(identifier: str, ctx: Any = None) -> Any:
        return ast.Name(identifier, ctx or ast.Load(), **at)

    def check(ok: Any, exc: Any) -> Any:
        line = ast.Constant(node.lineno, **at)
        return ast.Expr(ast.Call(name("__collimate_check__"), [line, ok, exc], [], **at), **at)

    ok_name = "__collimate_ok__"
    truth = ast.Call(name("bool"), [node.test], [], **at)
    failed = check(ast.Constant(False, **at), name("__collimate_exc__"))
    handler = ast.ExceptHandler(name("Exception"), "__collimate_exc__", [failed], **at)
    assign = ast.Assign([name(ok_name, ast.Store())], truth, **at)
    done = check(name(ok_name), ast.Constant(None, **at))
    return ast.Try([assign], [handler], [done], [], **at)
