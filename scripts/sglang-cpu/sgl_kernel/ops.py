"""The CPU ops SGLang 0.5.23 calls on ``--device cpu``, written for specsweep in plain Python/torch.

Each function keeps the name and argument order of SGLang 0.5.23's call site (cited per op) and follows the
semantics of the Triton kernel SGLang ships beside that call site for the other devices (or, for
``reconstruct_indices_from_tree_mask``, the contract spelled out in its module docstring). Paths are relative to
the sglang 0.5.23 wheel. Outputs are written in place, as the kernels do. Batches on this path are a few requests of
a few draft tokens, so plain loops over requests are fine; the tensors are small.
"""

from __future__ import annotations

import ctypes
from typing import NoReturn

import torch


def _ints(t: torch.Tensor) -> list[int]:
    return [int(x) for x in t.reshape(-1).tolist()]


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Write each request's new slots into its row of ``req_to_token``.

    Follows sglang/srt/mem_cache/allocation.py ``assign_req_to_token_pool`` (Triton): request i reads
    ``end[i] - start[i]`` values from ``out_cache_loc`` at the running sum of the earlier requests' lengths and stores
    them at ``req_to_token[req_pool_indices[i], start[i]:end[i]]``. Called by ``assign_req_to_token_pool_func``.
    """
    del pool_len  # the row length; req_to_token is indexed as a 2-D tensor here
    out = 0
    for row, start, end in zip(_ints(req_pool_indices), _ints(start_offset), _ints(end_offset), strict=True):
        n = end - start
        if n > 0:
            req_to_token[row, start:end] = out_cache_loc[out : out + n].to(req_to_token.dtype)
        out += max(n, 0)


def assign_extend_cache_locs_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Gather each request's slots ``[start, end)`` of its ``req_to_token`` row, packed one request after another.

    Follows sglang/kernels/ops/speculative/cache_locs.py ``assign_extend_cache_locs`` (Triton): the inverse of
    ``assign_req_to_token_pool``. Called by ``assign_extend_cache_locs_func`` and ``fill_front_out_cache_loc_func``
    in the same file (the latter passes a 2-D window as ``req_to_token`` and row numbers as ``req_pool_indices``).
    """
    del pool_len
    out = 0
    for row, start, end in zip(_ints(req_pool_indices), _ints(start_offset), _ints(end_offset), strict=True):
        n = end - start
        if n > 0:
            out_cache_loc[out : out + n] = req_to_token[row, start:end].to(out_cache_loc.dtype)
        out += max(n, 0)


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    seq_lens: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
    topk: int,
    num_cols: int,
) -> None:
    """Copy ``topk * num_cols`` slots of each request's row from ``seq_lens[i]`` on into its block of the output.

    Follows sglang/kernels/ops/speculative/cache_locs.py ``assign_draft_cache_locs_contiguous`` (Triton) with
    ``WRITE_POSITIONS`` off (the CPU call in ``assign_draft_cache_locs_contiguous_func`` asserts no positions): request
    i's block starts at ``i * topk * num_cols``.
    """
    del pool_len
    width = topk * num_cols
    for i, (row, start) in enumerate(zip(_ints(req_pool_indices), _ints(seq_lens), strict=True)):
        out_cache_loc[i * width : (i + 1) * width] = req_to_token[row, start : start + width].to(out_cache_loc.dtype)


def fill_bonus_tokens_cpu(
    accept_tokens: torch.Tensor,
    accept_lens: torch.Tensor,
    bonus_tokens: torch.Tensor,
    accept_stride: int,
) -> None:
    """``bonus_tokens[i] = accept_tokens.flat[accept_stride * i + accept_lens[i] - 1]`` (the last accepted slot).

    Follows sglang/kernels/ops/speculative/eagle.py ``fill_bonus_tokens`` (Triton); called by
    ``fill_bonus_tokens_func`` there.
    """
    flat = accept_tokens.reshape(-1)
    for i, n in enumerate(_ints(accept_lens)):
        bonus_tokens[i] = flat[accept_stride * i + n - 1]


def fill_accept_out_cache_loc_cpu(
    accept_index: torch.Tensor,
    out_cache_loc: torch.Tensor,
    accept_out_cache_loc: torch.Tensor,
) -> None:
    """Pack ``out_cache_loc[accept_index[p]]`` for every ``p`` whose index is not -1, in order.

    Follows sglang/kernels/ops/speculative/eagle.py ``fill_accept_out_cache_loc`` (Triton): program p writes to the
    count of non -1 entries before it, and only when its own index is > -1. Called (3 arguments) by
    ``fill_accept_out_cache_loc_func`` there.
    """
    flat = accept_index.reshape(-1)
    picked = flat[flat > -1]
    count = int(picked.numel())
    if count:
        accept_out_cache_loc[:count] = out_cache_loc[picked.to(torch.int64)].to(accept_out_cache_loc.dtype)


def rotate_input_ids_cpu(
    input_ids: torch.Tensor,
    extend_start_loc: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    topk_index: torch.Tensor,
    select_index: torch.Tensor | None,
) -> None:
    """Shift each request's segment of ``input_ids`` left by one and put its new token last (or at ``select_index``).

    Follows sglang/kernels/ops/speculative/multi_layer_eagle.py ``rotate_input_ids_kernel`` (Triton); called by
    ``rotate_input_ids`` there (multi-layer EAGLE only; NGRAM does not reach it).
    """
    new_tokens = topk_index.reshape(-1)
    selects = None if select_index is None else _ints(select_index)
    for i, (start, n) in enumerate(zip(_ints(extend_start_loc), _ints(extend_seq_lens), strict=True)):
        if n > 1:
            input_ids[start : start + n - 1] = input_ids[start + 1 : start + n].clone()
        if n > 0:
            last = selects[i] if selects is not None else start + n - 1
            input_ids[last] = new_tokens[i]


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor,
    strides: torch.Tensor,
    tgt_loc: torch.Tensor,
    src_loc: torch.Tensor,
) -> None:
    """For every KV buffer (base address ``data_ptrs[b]``, row size ``strides[b]`` bytes) copy row ``src[j]`` to row
    ``tgt[j]``, reading all source rows before writing (safe in place).

    Follows sglang/kernels/ops/kvcache/cache_move.py ``copy_all_layer_kv_cache_tiled`` (Triton), which loads every
    source row of a tile before it stores; called by ``copy_all_layer_kv_cache_func`` there with the locations already
    cut to ``num_locs``.
    """
    src = src_loc.reshape(-1).to(torch.int64)
    tgt = tgt_loc.reshape(-1).to(torch.int64)
    if src.numel() == 0:
        return
    rows = int(torch.maximum(src.max(), tgt.max())) + 1
    for base, stride in zip(_ints(data_ptrs), _ints(strides), strict=True):
        raw = (ctypes.c_uint8 * (rows * stride)).from_address(base)
        buf = torch.frombuffer(raw, dtype=torch.uint8).view(rows, stride)
        buf[tgt] = buf[src]  # advanced indexing gathers a copy of the sources first


def build_tree_kernel_efficient_cpu(
    parent_list: torch.Tensor,
    selected_index: torch.Tensor,
    verified_seq_len: torch.Tensor,
    tree_mask: torch.Tensor,
    positions: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    topk: int,
    depth: int,
    draft_token_num: int,
    tree_mask_mode: int,
) -> None:
    """Build an EAGLE draft tree's retrieve links, positions and attention mask from the top-k selection.

    Follows sglang/kernels/ops/speculative/spec_tree.py ``sgl_build_tree_kernel_efficient_triton`` (launched by
    ``sgl_build_tree_kernel_triton``; the CPU branch of ``build_tree_kernel_efficient_func`` calls this op with the
    same arguments). Modes FULL_MASK (0) and QLEN_ONLY (1) as there; QLEN_ONLY_BITPACKING (2) is refused, as the
    Triton version refuses it. As there, ``retrieve_next_token``/``retrieve_next_sibling`` must come in filled with
    -1 and, in FULL_MASK, the prefix part of ``tree_mask`` is left to the caller. NGRAM does not call this op (it
    rebuilds the links from its own mask, see ``reconstruct_indices_from_tree_mask``); EAGLE/STANDALONE do.
    """
    mode = int(tree_mask_mode)
    if mode not in (0, 1):
        raise NotImplementedError(
            f"sgl_kernel.build_tree_kernel_efficient_cpu: tree_mask_mode {mode} (QLEN_ONLY_BITPACKING) is not "
            "implemented by specsweep's CPU sgl_kernel (only FULL_MASK=0 and QLEN_ONLY=1)"
        )
    n = draft_token_num
    seq_lens = _ints(verified_seq_len)
    bs = len(seq_lens)
    parents = parent_list.reshape(bs, -1).tolist()
    selected = selected_index.reshape(bs, -1).tolist()
    next_token = retrieve_next_token.reshape(bs, n).tolist()
    next_sibling = retrieve_next_sibling.reshape(bs, n).tolist()
    ridx = retrieve_index.reshape(bs, n)
    mask = tree_mask.view(-1)
    pos_out = positions.view(-1)
    prefix_sum = 0
    for b in range(bs):
        seq_len, sel, par = seq_lens[b], selected[b], parents[b]

        def find(token: int, sel: list[int] = sel) -> int:
            # first draft slot whose selected index is `token`, -1 if none (the Triton `found` loops)
            for cp in range(n - 1):
                if sel[cp] == token:
                    return cp
            return -1

        seq_tree_idx = n * n * b + prefix_sum * n
        pos = [seq_len] * n
        for i in range(n - 1, 0, -1):
            ridx[b, i] = b * n + i
            parent_tb_idx = sel[i - 1] // topk
            if parent_tb_idx == 0:
                parent_position = 0
            else:
                cp = find(par[parent_tb_idx])
                if cp < 0:
                    continue
                parent_position = cp + 1
            previous = next_token[b][parent_position]
            next_token[b][parent_position] = i
            if previous != -1:
                next_sibling[b][i] = previous
        ridx[b, 0] = b * n
        for x in range(n):
            # FULL_MASK rows are (prefix + n) wide and follow the earlier requests' rows; QLEN_ONLY rows are n wide
            full_idx = seq_tree_idx + (seq_len + n) * x + seq_len + 1
            token_tree_idx = full_idx if mode == 0 else n * n * b + n * x + 1
            mask[token_tree_idx - 1] = True
            mask[token_tree_idx : token_tree_idx + n - 1] = False
            if x == 0:
                continue
            cur, position = x - 1, 0
            for _ in range(depth):
                position += 1
                mask[token_tree_idx + cur] = True
                parent_tb_idx = sel[cur] // topk
                if parent_tb_idx == 0:
                    break
                cp = find(par[parent_tb_idx])
                if cp < 0:
                    break
                cur = cp
            pos[x] = position + seq_len
        pos_out[b * n : (b + 1) * n] = torch.tensor(pos, dtype=pos_out.dtype)
        prefix_sum += seq_len
    retrieve_next_token.copy_(torch.tensor(next_token, dtype=retrieve_next_token.dtype).view_as(retrieve_next_token))
    retrieve_next_sibling.copy_(
        torch.tensor(next_sibling, dtype=retrieve_next_sibling.dtype).view_as(retrieve_next_sibling)
    )


def verify_tree_greedy_cpu(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """Greedy tree verification: walk the draft tree from the root, at each level accept the child (first, then its
    siblings) whose draft token equals the target's prediction at the last accepted node; stop at the first level with
    no match. Writes the accepted node indices (root first) to ``accept_index``, the number of accepted drafts to
    ``accept_token_num`` and the target's tokens to ``predicts`` at every accepted node (the last one's is the bonus).

    Follows sglang/kernels/ops/speculative/spec_tree.py ``verify_tree_greedy_kernel_triton``; called by the CPU
    branch of ``verify_tree_greedy_func`` there with these keyword names (``retrive_*`` as in the op schema).
    ``accept_index`` comes in filled with -1; its width is the number of speculative tokens.
    """
    bs, n = candidates.shape[0], candidates.shape[1]
    steps = accept_index.shape[1]
    cands = candidates.reshape(bs, n).tolist()
    ridx = retrive_index.reshape(bs, n).tolist()
    nxt = retrive_next_token.reshape(bs, n).tolist()
    sib = retrive_next_sibling.reshape(bs, n).tolist()
    target = target_predict.reshape(-1).tolist()
    pred = predicts.view(-1)
    for b in range(bs):
        last = ridx[b][0]
        accepted = [last]
        cur = 0
        for _ in range(1, steps):
            cur = nxt[b][cur]
            want = target[last]
            found = False
            for _ in range(n):  # the Triton loop's bound on a sibling list
                if cur == -1:
                    break
                if cands[b][cur] == want:
                    found = True
                    break
                cur = sib[b][cur]
            if not found:
                break
            pred[last] = want
            last = ridx[b][cur]
            accepted.append(last)
        accept_index[b, : len(accepted)] = torch.tensor(accepted, dtype=accept_index.dtype)
        accept_token_num[b] = len(accepted) - 1
        pred[last] = target[last]


def reconstruct_indices_from_tree_mask(
    tree_mask: torch.Tensor,
    verified_seq_len: torch.Tensor,
    positions: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    batch_size: int,
    draft_token_num: int,
) -> None:
    """NGRAM's verify metadata from its tree mask (``tree_mask[b, i, j]``: node j is an ancestor of node i or i).

    Follows the contract in sglang/kernels/ops/speculative/reconstruct_tree.py (module docstring and
    ``_reconstruct_tree_mask_kernel``): with ``ancestors[i, j] = mask[i, j] and j < i``, ``positions = #ancestors +
    verified_seq_len[b]``, ``retrieve_index = b * n + i``, ``parent[i]`` = the last ancestor (-1 if none),
    ``retrieve_next_token[i]`` = the first later node that has i as an ancestor (-1 if none) and
    ``retrieve_next_sibling[i]`` = the first later node with the same parent (-1 if none, or if i has no parent).
    Called by ``reconstruct_indices_from_tree_mask_func`` there from sglang/srt/speculative/ngram_worker.py.
    """
    bs, n = batch_size, draft_token_num
    if bs == 0:
        return
    mask = tree_mask.reshape(-1)[: bs * n * n].view(bs, n, n).to(torch.bool)
    idx = torch.arange(n)
    row = idx.view(1, n, 1)
    col = idx.view(1, 1, n)
    ancestors = mask & (col < row)
    depth = ancestors.sum(dim=2)
    positions.view(-1)[: bs * n] = (depth + verified_seq_len.reshape(bs, 1).to(torch.int64)).reshape(-1)
    retrieve_index.view(-1)[: bs * n] = torch.arange(bs * n, dtype=torch.int64)
    parent = torch.where(ancestors, col, -1).amax(dim=2)  # [bs, n], indexed by node i
    has_child = ancestors.any(dim=1)  # [bs, n], indexed by the ancestor column
    first_child = torch.where(ancestors, row, n).amin(dim=1)
    retrieve_next_token.view(-1)[: bs * n] = torch.where(has_child, first_child, -1).reshape(-1)
    same_parent = (parent.unsqueeze(2) == parent.unsqueeze(1)) & (row > col)  # [bs, k, i]: k after i, same parent
    first_sibling = torch.where(same_parent, row, n).amin(dim=1)
    next_sibling = torch.where((parent >= 0) & (first_sibling < n), first_sibling, -1)
    retrieve_next_sibling.view(-1)[: bs * n] = next_sibling.reshape(-1)


def build_draft_decode_metadata_cpu(*args: object, **kwargs: object) -> NoReturn:
    """Only the Intel AMX attention backend's multi-step draft decode calls this
    (sglang/srt/layers/attention/intel_amx_backend.py); that backend needs upstream's compiled sgl-kernel anyway."""
    raise NotImplementedError(
        "sgl_kernel.build_draft_decode_metadata_cpu is not implemented by specsweep's CPU sgl_kernel: only the Intel "
        "AMX attention backend calls it, and that backend needs upstream's compiled sgl-kernel"
    )
