"""The model's own answer to "which drafts would a self-draft accept": run by the engine's own Python.

This file is a standalone script: it imports only torch and transformers (the engine's venv has both) and never
``orchestrator``, so that ``SGLANG_PYTHON selfdraft_probe.py`` runs it where the engine runs.
:mod:`orchestrator.engines.sglang.golden` sends it the prompts and reads its answer.

SGLang's STANDALONE speculation (``--speculative-algorithm STANDALONE``) drives a separate draft model through
EAGLE's tree machinery. Its draft is fed the sequence rotated left by one: the EAGLE convention of
``_draft_extend_for_prefill`` and ``_draft_extend_for_decode`` in ``sglang/srt/speculative/eagle_worker_v2.py``
(ids shifted by one, the target's newest token appended). With the target itself as the draft
(``--speculative-draft-model-path`` = ``--model-path``: a self-draft), the draft's proposal for output position
``j`` is therefore the model's argmax over the sequence *without its first token*, and verification accepts it
where that equals the model's argmax over the whole sequence, the greedy token. Which positions agree is a
property of the model and the prompt alone; walking a chain of S drafts over it gives every verify step's accept
length (:func:`orchestrator.engines.sglang.golden.chain_steps`).

Input (stdin, JSON): ``{"model": folder, "requests": [{"key": str, "messages": [...] | null, "text": str | null,
"tokens": int}]}``. Output (stdout, one JSON object per request): ``key``, ``prompt_tokens`` (after the chat
template), ``output_ids`` (the greedy continuation, ``tokens`` long, EOS not stopping it: verification compares
drafts past the end as well), ``agree`` (per output position; position 0 is the prefill's token and always
false) and ``eos`` (the first output position holding an end-of-sequence token, or null).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _prompt_ids(tokenizer: Any, request: dict[str, Any]) -> list[int]:
    if request.get("messages") is not None:
        ids = tokenizer.apply_chat_template(request["messages"], add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]
    return [int(t) for t in tokenizer(request.get("text") or "")["input_ids"]]


def main() -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    job = json.load(sys.stdin)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    # float32, as the project's CPU sweeps serve it (--dtype float32), so that near ties fall the same way.
    model = AutoModelForCausalLM.from_pretrained(job["model"], dtype=torch.float32)
    model.eval()
    eos = set()
    for source in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            eos.add(source)
        elif source:
            eos.update(int(t) for t in source)
    with torch.inference_mode():
        for request in job["requests"]:
            prompt = _prompt_ids(tokenizer, request)
            n = int(request["tokens"])
            # The greedy continuation, one token at a time with the model's own KV cache.
            out = model(torch.tensor([prompt]), use_cache=True)
            past = out.past_key_values
            token = int(out.logits[0, -1].argmax())
            output = [token]
            while len(output) < n:
                out = model(torch.tensor([[token]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = int(out.logits[0, -1].argmax())
                output.append(token)
            sequence = prompt + output
            # The draft's view: the sequence without its first token. Its logits at index t predict the token
            # after sequence[1 : t + 2], so output position j (sequence index L + j) is proposed at t = L + j - 2.
            shifted = model(torch.tensor([sequence[1:-1]])).logits[0].argmax(dim=-1).tolist()
            length = len(prompt)
            agree = [False] + [int(shifted[length + j - 2]) == output[j] for j in range(1, n)]
            first_eos = next((j for j, t in enumerate(output) if t in eos), None)
            answer = {
                "key": request["key"],
                "prompt_tokens": length,
                "output_ids": output,
                "agree": agree,
                "eos": first_eos,
            }
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
