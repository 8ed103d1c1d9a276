"""Make a truncated-layer draft model from a Hugging Face Llama folder: the embeddings, the final norm, the LM head
(when not tied) and the first L decoder layers, with ``num_hidden_layers`` = L in config.json.

scripts/get-sglang-cpu.sh runs it with the engine's interpreter to give SGLang's STANDALONE speculation a draft
whose acceptance lies strictly between 0 and 1 (no smaller model of SmolLM2's tokenizer is in the package index):
its proposals are the first L layers' guess, which the full model accepts sometimes. SGLang checks that the
draft's vocabulary matches the target's, and it does (the same tokenizer files are copied).

Deterministic: the same folder and L give the same bytes (tensors written in name order, no time stamps); the
caller checks the produced model.safetensors against its pinned sha256.

Usage: python make-draft-model.py MODEL_DIR LAYERS OUT_DIR
"""

import json
import pathlib
import re
import shutil
import sys


def main(argv: list[str]) -> None:
    if len(argv) != 3 or not argv[1].isdigit():
        sys.exit("usage: make-draft-model.py MODEL_DIR LAYERS OUT_DIR")
    from safetensors.torch import load_file, save_file

    source, layers, out = pathlib.Path(argv[0]), int(argv[1]), pathlib.Path(argv[2])
    config = json.loads((source / "config.json").read_text())
    total = int(config["num_hidden_layers"])
    if not 1 <= layers < total:
        sys.exit(f"LAYERS must be between 1 and {total - 1} (the model has {total} layers), not {layers}")
    tensors = load_file(str(source / "model.safetensors"))
    kept = {}
    layer_name = re.compile(r"^model\.layers\.(\d+)\.")
    for name in sorted(tensors):
        found = layer_name.match(name)
        if found is None or int(found.group(1)) < layers:
            kept[name] = tensors[name].contiguous()
    out.mkdir(parents=True, exist_ok=True)
    save_file(kept, str(out / "model.safetensors"), metadata={"format": "pt"})
    config["num_hidden_layers"] = layers
    config["_specsweep_draft"] = f"the first {layers} of {total} decoder layers of the target"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for extra in sorted(source.iterdir()):
        skipped = extra.name in ("config.json", "model.safetensors") or extra.name.startswith(".")
        if extra.is_file() and not skipped:
            shutil.copyfile(extra, out / extra.name)
    print(f"draft model: {layers} of {total} layers, {len(kept)} tensors -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
