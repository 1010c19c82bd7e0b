"""The step kernels in the Ascend lowering audit (tools/ascend_lowering): the boundary search and
the planned rungs' counted kernels, at every C (4 with and without overlap too), block size and
state dtype, reach code generation for an Ascend910B3. Skips without the side install, as
tests/test_ascend_lowering.py does."""


import pytest

from tools import ascend_lowering as audit
from ascend_kvc.stages import MERGE_OR_WHOLE
from tools.ascend_lowering import matrix as mx

# make audit runs the tests marked audit on the whole matrix (make test: the quick scope)
pytestmark = pytest.mark.audit


@pytest.fixture
def report(audit_report):
    return audit_report


def _step_entries(report):
    return [e for e in report["entries"] if mx.STEP_SUFFIX in e["stage"]]


def test_every_step_kernel_reaches_code_generation(report):
    entries = _step_entries(report)
    assert {e["stage"] for e in entries} == {f"{s}{o}/step{t}" for s in ("triton-quant", "fused")
                                             for o in ("", "/overlap") for t in ("", "/split", "/inline")}
    # C = 4, 128, 256, 512 plain; C = 4 with overlap; each at every block size and state dtype
    # (the quick scope of make test: one entry a stage)
    cells = (4 + 1) * len(mx.BLOCK_SIZES) * len(mx.STATE_DTYPES) if report["scope"] == "full" else 2
    assert len(entries) == 6 * cells
    for e in entries:
        kernels = [report["results"][k] for k in e["kernels"]]
        names = [r["spec"]["kernel"] for r in kernels]
        if e["stage"].endswith(mx.INLINE_SUFFIX):  # no search launch: the piece gather searches, in registers
            assert names[0] == "_window_piece_kernel" and not set(names) & set(mx.SEARCH_KERNELS), e
            cx = kernels[0]["spec"]["constexprs"]
            assert cx["INLINE_T"] > 0 and cx["HAS_STATE_SLOTS"] is True, e
        else:
            assert names[:2] == list(mx.SEARCH_KERNELS), e  # the search first
            if e["stage"].endswith(mx.SPLIT_SUFFIX):  # the merge and the unsplit gather: one kernel
                assert set(names) & set(MERGE_OR_WHOLE.values()), e
                assert not set(names) & {*MERGE_OR_WHOLE, "_fused_compress_kernel", "_gather_to_bf16_kernel"}, e
        for r in kernels:
            assert r["front_end"] and r["compiler"] == audit.CODEGEN, (e, r["spec"], r.get("compiler_message"))
            cx, kernel = r["spec"]["constexprs"], r["spec"]["kernel"]
            if kernel in MERGE_OR_WHOLE.values():  # always counted: no COUNTED to specialise
                assert "COUNTED" not in cx and r["spec"]["pointer_types"]["count_ptr"] == "*i32", (e, r["spec"])
            elif kernel not in mx.SEARCH_KERNELS:
                assert cx["COUNTED"] is True and r["spec"]["pointer_types"]["count_ptr"] == "*i32", (e, r["spec"])


def test_search_kernels_read_whole_token_tiles(report):
    """Positions and slots arrive as whole [BLOCK_T] vectors; the count kernel has no scalar loop;
    the list's scattered store is the list kernel's one scalar loop."""
    seen = set()
    for r in report["results"].values():
        kernel = r["spec"]["kernel"]
        if kernel not in mx.SEARCH_KERNELS:
            continue
        seen.add(kernel)
        a, block_t = r["analysis"], r["spec"]["constexprs"]["BLOCK_T"]
        tiles = [c for c in a["copies"] if c["shape"] == f"{block_t}xi64" and not c["in_scalar_loop"]]
        assert len(tiles) == 3, a  # positions, kv slots, state slots
        if kernel == "_count_boundaries_kernel":
            assert a["scalar_loops"] == 0 == a["discrete_accesses"], a
        else:
            assert a["scalar_loops"] == 1, a
    assert seen == set(mx.SEARCH_KERNELS)
