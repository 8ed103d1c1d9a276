"""scripts/sglang-cpu/sgl_kernel: the CPU ops SGLang 0.5.23 calls on `--device cpu`, each against a hand-checked case
and, where the op has room for it, a plain reference written from the Triton kernel it follows (cited per test).

The package is imported from the source tree, as scripts/get-sglang-cpu.sh installs it into the SGLang venv."""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

try:
    import torch
except ImportError:  # the project's .venv has no torch: the SGLang CPU venv does (scripts/get-sglang-cpu.sh)
    torch = None

# A skip per test, not a module-level importorskip: that one happened at collection, before -k and -m deselect,
# so every filtered run (`-k "slot or gpu"`) reported this module as one skipped "test" whatever it selected.
pytestmark = pytest.mark.skipif(
    torch is None,
    reason="needs torch (these are SGLang's CPU ops on plain torch; the project's .venv has none, the SGLang "
    "CPU venv that scripts/get-sglang-cpu.sh builds has it)",
)

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "scripts" / "sglang-cpu"


@pytest.fixture(scope="module")
def sk() -> ModuleType:
    sys.path.insert(0, str(PACKAGE_DIR))
    try:
        return importlib.import_module("sgl_kernel")
    finally:
        sys.path.remove(str(PACKAGE_DIR))


def i64(*values: object) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


# ---- greedy tree verification (sglang/kernels/ops/speculative/spec_tree.py verify_tree_greedy_kernel_triton) ----


def _verify(sk: ModuleType, candidates, next_token, next_sibling, target, steps: int):
    cand = torch.tensor(candidates, dtype=torch.int64)
    bs, n = cand.shape
    predicts = torch.full((bs * n,), -7, dtype=torch.int64)
    accept_index = torch.full((bs, steps), -1, dtype=torch.int64)
    accept_num = torch.zeros(bs, dtype=torch.int64)
    sk.verify_tree_greedy_cpu(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=accept_num,
        candidates=cand,
        retrive_index=torch.arange(bs * n, dtype=torch.int64).view(bs, n),
        retrive_next_token=torch.tensor(next_token, dtype=torch.int64),
        retrive_next_sibling=torch.tensor(next_sibling, dtype=torch.int64),
        target_predict=torch.tensor(target, dtype=torch.int64),
    )
    return predicts.tolist(), accept_index.tolist(), accept_num.tolist()


def test_verify_chain_accepts_the_matching_prefix_and_the_bonus(sk: ModuleType) -> None:
    # root, then drafts 11, 12, 13 in a chain; the target predicts 11 after the root, 12 after 11, 99 after 12:
    # drafts 1 and 2 match, draft 3 does not -> 2 accepted, the bonus (99) at node 2, node 3 untouched.
    predicts, accept_index, accept_num = _verify(
        sk, [[5, 11, 12, 13]], [[1, 2, 3, -1]], [[-1, -1, -1, -1]], [[11, 12, 99, 50]], steps=4
    )
    assert accept_num == [2]
    assert accept_index == [[0, 1, 2, -1]]
    assert predicts == [11, 12, 99, -7]


def test_verify_takes_a_matching_sibling_and_stops_at_a_leaf(sk: ModuleType) -> None:
    # root's children: node 1 (token 5) then its sibling node 2 (token 7); node 2's child node 3 (token 8).
    # target after root = 7 -> node 2 (via the sibling); after node 2 = 8 -> node 3; node 3 is a leaf -> stop.
    predicts, accept_index, accept_num = _verify(
        sk, [[0, 5, 7, 8]], [[1, -1, 3, -1]], [[-1, 2, -1, -1]], [[7, 1, 8, 42]], steps=4
    )
    assert accept_num == [2]
    assert accept_index == [[0, 2, 3, -1]]
    assert predicts == [7, -7, 8, 42]


def test_verify_batch_uses_each_rows_global_indices(sk: ModuleType) -> None:
    # two requests of 3 nodes (chains); request 0 rejects the first draft, request 1 accepts both.
    predicts, accept_index, accept_num = _verify(
        sk,
        [[0, 4, 6], [0, 8, 9]],
        [[1, 2, -1], [1, 2, -1]],
        [[-1, -1, -1], [-1, -1, -1]],
        [[3, 6, 0], [8, 9, 10]],
        steps=3,
    )
    assert accept_num == [0, 2]
    assert accept_index == [[0, -1, -1], [3, 4, 5]]
    assert predicts == [3, -7, -7, 8, 9, 10]


# ---- NGRAM's tree metadata (sglang/kernels/ops/speculative/reconstruct_tree.py, its docstring's contract) ----


def _reconstruct(sk: ModuleType, rows: list[list[list[int]]], seq_lens: list[int]):
    bs, n = len(rows), len(rows[0])
    mask = torch.tensor(rows, dtype=torch.bool).reshape(-1)
    positions = torch.full((bs * n,), -9, dtype=torch.int64)
    ridx, nxt, sib = (torch.full((bs, n), -9, dtype=torch.int64) for _ in range(3))
    sk.reconstruct_indices_from_tree_mask(mask, i64(*seq_lens), positions, ridx, nxt, sib, bs, n)
    return positions.tolist(), ridx.tolist(), nxt.tolist(), sib.tolist()


def _reconstruct_reference(rows: list[list[list[int]]], seq_lens: list[int]):
    # The docstring's definitions, one node at a time.
    positions, ridx, nxt, sib = [], [], [], []
    for b, mask in enumerate(rows):
        n = len(mask)
        anc = [[bool(mask[i][j]) and j < i for j in range(n)] for i in range(n)]
        parent = [max((j for j in range(i) if anc[i][j]), default=-1) for i in range(n)]
        positions += [sum(anc[i]) + seq_lens[b] for i in range(n)]
        ridx.append([b * n + i for i in range(n)])
        nxt.append([next((k for k in range(i + 1, n) if anc[k][i]), -1) for i in range(n)])
        sib.append(
            [
                -1 if parent[i] < 0 else next((k for k in range(i + 1, n) if parent[k] == parent[i]), -1)
                for i in range(n)
            ]
        )
    return positions, ridx, nxt, sib


def test_reconstruct_a_small_tree_by_hand(sk: ModuleType) -> None:
    # node 0 root; 1 and 2 children of 0; 3 child of 2. Second request: a chain of 4, prefix 3.
    tree = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]]
    chain = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    positions, ridx, nxt, sib = _reconstruct(sk, [tree, chain], [10, 3])
    assert positions == [10, 11, 11, 12, 3, 4, 5, 6]
    assert ridx == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert nxt == [[1, -1, 3, -1], [1, 2, 3, -1]]
    assert sib == [[-1, 2, -1, -1], [-1, -1, -1, -1]]


def test_reconstruct_matches_the_reference_on_random_trees(sk: ModuleType) -> None:
    rng = random.Random(7)
    for _ in range(30):
        bs, n = rng.randint(1, 3), rng.randint(1, 7)
        rows = []
        for _ in range(bs):
            parent = [-1] + [rng.randrange(i) for i in range(1, n)]
            mask = [[0] * n for _ in range(n)]
            for i in range(n):
                j = i
                while j >= 0:
                    mask[i][j] = 1
                    j = parent[j]
            rows.append(mask)
        seq_lens = [rng.randint(0, 50) for _ in range(bs)]
        assert _reconstruct(sk, rows, seq_lens) == _reconstruct_reference(rows, seq_lens)


def test_reconstruct_then_verify_walks_the_tree(sk: ModuleType) -> None:
    # The NGRAM order of calls: the links the mask gives drive the verification.
    tree = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]]
    _, _, nxt, sib = _reconstruct(sk, [tree], [0])
    _, accept_index, accept_num = _verify(sk, [[0, 5, 7, 8]], nxt, sib, [[7, 1, 8, 42]], steps=4)
    assert (accept_num, accept_index) == ([2], [[0, 2, 3, -1]])


# ---- EAGLE tree building (sglang/kernels/ops/speculative/spec_tree.py sgl_build_tree_kernel_efficient_triton) ----


def _build(sk: ModuleType, parent_list, selected, seq_lens, topk: int, depth: int, n: int, mode: int, fill: int = 0):
    bs = len(seq_lens)
    size = bs * n * n if mode == 1 else sum(s * n + n * n for s in seq_lens)
    tree_mask = torch.full((size,), bool(fill), dtype=torch.bool)
    positions = torch.zeros(bs * n, dtype=torch.int64)
    ridx = torch.full((bs, n), -5, dtype=torch.int64)
    nxt = torch.full((bs, n), -1, dtype=torch.int64)
    sib = torch.full((bs, n), -1, dtype=torch.int64)
    sk.build_tree_kernel_efficient_cpu(
        torch.tensor(parent_list, dtype=torch.int64),
        torch.tensor(selected, dtype=torch.int64),
        i64(*seq_lens),
        tree_mask,
        positions,
        ridx,
        nxt,
        sib,
        topk,
        depth,
        n,
        mode,
    )
    return tree_mask, positions.tolist(), ridx.tolist(), nxt.tolist(), sib.tolist()


def test_build_tree_chain_qlen(sk: ModuleType) -> None:
    # topk 1, 3 steps: draft slot i's parent is slot i-1 (parent_list maps score index k to slot k).
    mask, positions, ridx, nxt, sib = _build(sk, [[-1, 0, 1, 2]], [[0, 1, 2]], [7], topk=1, depth=3, n=4, mode=1)
    assert mask.view(4, 4).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert positions == [7, 8, 9, 10]
    assert ridx == [[0, 1, 2, 3]]
    assert nxt == [[1, 2, 3, -1]]
    assert sib == [[-1, -1, -1, -1]]


def test_build_tree_with_siblings_qlen(sk: ModuleType) -> None:
    # topk 2, depth 2: slots 1 and 2 are the root's two children (scores 0, 1), slot 3 the first child of slot 1
    # (score 2 // topk = 1 -> parent_list[1] = score 0 = slot 1). Links: root -> 1 -> sibling 2; 1 -> 3.
    mask, positions, _, nxt, sib = _build(sk, [[-1, 0, 1]], [[0, 1, 2]], [5], topk=2, depth=2, n=4, mode=1)
    assert mask.view(4, 4).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert positions == [5, 6, 6, 7]
    assert nxt == [[1, 3, -1, -1]]
    assert sib == [[-1, 2, -1, -1]]


def test_build_tree_full_mask_places_the_qlen_block_after_each_prefix(sk: ModuleType) -> None:
    # FULL_MASK rows are (prefix + n) wide; the kernel writes the draft columns only (the prefix stays as filled).
    seq_lens = [2, 3]
    qlen, *rest_q = _build(sk, [[-1, 0, 1]] * 2, [[0, 1, 2]] * 2, seq_lens, topk=2, depth=2, n=4, mode=1)
    full, *rest_f = _build(sk, [[-1, 0, 1]] * 2, [[0, 1, 2]] * 2, seq_lens, topk=2, depth=2, n=4, mode=0, fill=1)
    assert rest_q == rest_f
    offset = 0
    for b, s in enumerate(seq_lens):
        block = full[offset : offset + 4 * (s + 4)].view(4, s + 4)
        assert block[:, :s].all()
        assert torch.equal(block[:, s:], qlen.view(2, 4, 4)[b])
        offset += 4 * (s + 4)


def test_build_tree_refuses_bitpacking(sk: ModuleType) -> None:
    with pytest.raises(NotImplementedError, match=r"build_tree_kernel_efficient_cpu.*BITPACKING"):
        _build(sk, [[-1, 0, 1]], [[0, 1, 2]], [5], topk=2, depth=2, n=4, mode=2)


# ---- KV slot bookkeeping ----


def test_assign_req_to_token_pool_writes_each_request_row(sk: ModuleType) -> None:
    # sglang/srt/mem_cache/allocation.py assign_req_to_token_pool: request i takes its slots from the running offset.
    req_to_token = torch.zeros((3, 8), dtype=torch.int32)
    sk.assign_req_to_token_pool_cpu(i64(2, 0), req_to_token, i64(1, 4), i64(3, 7), i64(10, 11, 20, 21, 22), 8)
    assert req_to_token.tolist() == [[0, 0, 0, 0, 20, 21, 22, 0], [0] * 8, [0, 10, 11, 0, 0, 0, 0, 0]]


def test_assign_extend_cache_locs_is_the_inverse(sk: ModuleType) -> None:
    # sglang/kernels/ops/speculative/cache_locs.py assign_extend_cache_locs
    req_to_token = torch.arange(24, dtype=torch.int32).view(3, 8)
    out = torch.full((5,), -1, dtype=torch.int64)
    sk.assign_extend_cache_locs_cpu(i64(2, 0), req_to_token, i64(1, 4), i64(3, 7), out, 8)
    assert out.tolist() == [17, 18, 4, 5, 6]
    back = torch.zeros((3, 8), dtype=torch.int32)
    sk.assign_req_to_token_pool_cpu(i64(2, 0), back, i64(1, 4), i64(3, 7), out, 8)
    assert back[2, 1:3].tolist() == [17, 18] and back[0, 4:7].tolist() == [4, 5, 6]


def test_assign_draft_cache_locs_contiguous_copies_topk_times_steps(sk: ModuleType) -> None:
    # sglang/kernels/ops/speculative/cache_locs.py assign_draft_cache_locs_contiguous (no positions)
    req_to_token = torch.arange(30, dtype=torch.int32).view(3, 10)
    out = torch.full((8,), -1, dtype=torch.int64)
    sk.assign_draft_cache_locs_contiguous_cpu(i64(1, 2), req_to_token, i64(3, 5), out, 10, 2, 2)
    assert out.tolist() == [13, 14, 15, 16, 25, 26, 27, 28]


def test_fill_bonus_tokens_takes_the_last_accepted_slot(sk: ModuleType) -> None:
    # sglang/kernels/ops/speculative/eagle.py fill_bonus_tokens
    bonus = torch.zeros(2, dtype=torch.int64)
    sk.fill_bonus_tokens_cpu(torch.tensor([[1, 2, 3], [4, 5, 6]]), i64(2, 3), bonus, 3)
    assert bonus.tolist() == [2, 6]


def test_fill_accept_out_cache_loc_packs_the_accepted_slots(sk: ModuleType) -> None:
    # sglang/kernels/ops/speculative/eagle.py fill_accept_out_cache_loc
    accept_index = torch.tensor([[0, 2, -1], [3, -1, -1]])
    out = torch.full((4,), -1, dtype=torch.int64)
    sk.fill_accept_out_cache_loc_cpu(accept_index, i64(100, 101, 102, 103, 104, 105), out)
    assert out.tolist() == [100, 102, 103, -1]


def test_rotate_input_ids_shifts_and_appends(sk: ModuleType) -> None:
    # sglang/kernels/ops/speculative/multi_layer_eagle.py rotate_input_ids_kernel
    ids = i64(1, 2, 3, 4, 5)
    sk.rotate_input_ids_cpu(ids, i64(0, 3), i64(3, 2), i64(9, 8), None)
    assert ids.tolist() == [2, 3, 9, 5, 8]
    ids = i64(1, 2, 3, 4, 5)
    sk.rotate_input_ids_cpu(ids, i64(0), i64(3), i64(9), i64(1))
    assert ids.tolist() == [2, 9, 3, 4, 5]


def test_copy_all_layer_kv_cache_reads_before_it_writes(sk: ModuleType) -> None:
    # sglang/kernels/ops/kvcache/cache_move.py copy_all_layer_kv_cache_tiled: a swap of rows 0 and 1 in every buffer.
    k = torch.arange(12, dtype=torch.bfloat16).view(4, 3)
    v = torch.arange(100, 108, dtype=torch.float32).view(4, 2)
    before_k, before_v = k.clone(), v.clone()
    ptrs = torch.tensor([k.data_ptr(), v.data_ptr()], dtype=torch.uint64)
    strides = i64(k.stride(0) * k.element_size(), v.stride(0) * v.element_size())
    sk.copy_all_layer_kv_cache_cpu(ptrs, strides, i64(0, 1, 3), i64(1, 0, 2))
    assert torch.equal(k[[0, 1, 3]], before_k[[1, 0, 2]]) and torch.equal(k[2], before_k[2])
    assert torch.equal(v[[0, 1, 3]], before_v[[1, 0, 2]]) and torch.equal(v[2], before_v[2])


def test_an_op_it_does_not_carry_fails_with_its_name(sk: ModuleType) -> None:
    with pytest.raises(ImportError, match=r"sgl_kernel\.decode_attention_cpu is not implemented"):
        exec("from sgl_kernel import decode_attention_cpu", {})
    with pytest.raises(NotImplementedError, match="build_draft_decode_metadata_cpu"):
        sk.build_draft_decode_metadata_cpu()
