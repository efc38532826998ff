#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/seed-*).

Small, valid inputs of every kind each parser reads, for libFuzzer to mutate.
Crash inputs found later live beside them (crash-*) and are not touched here.
  tests/fuzz/make_seeds.py --kiln build/kiln --cache build/test-cache/l3
--kiln makes the token shard and checkpoint manifest seeds (a real run);
--cache gives IR text from compile-cache entries (the IR seeds).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
ASSETS = ROOT.parent / "shared" / "assets"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / f"seed-{name}").write_bytes(data)


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] in data order."""
    header, offset = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def safetensors_seeds():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    put("safetensors", "f32", safetensors_bytes([("w", "F32", [2, 3], f32)]))
    put("safetensors", "mixed", safetensors_bytes(
        [("a", "BF16", [2], b"\x80\x3f\x00\x40"), ("b", "I64", [1], struct.pack("<q", -7)),
         ("c", "BOOL", [3], b"\x01\x00\x01"), ("d", "F16", [], b"\x00\x3c"),
         ("e", "I32", [0, 4], b""), ("f", "F64", [1, 1], struct.pack("<d", 0.5))],
        {"format": "pt", "step": "3"}))
    put("safetensors", "empty", safetensors_bytes([]))


def trimmed_tokenizer(path, keep):
    """The tokenizer.json at `path` with its first `keep` vocabulary entries,
    the merges among them, and its added tokens renumbered after them."""
    j = json.loads(Path(path).read_text())
    vocab = {t: i for t, i in j["model"]["vocab"].items() if i < keep}
    merges = []
    for m in j["model"]["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    j["model"]["vocab"], j["model"]["merges"] = vocab, merges
    added = j["added_tokens"][:8]
    for n, t in enumerate(added):
        t["id"] = keep + n
    j["added_tokens"] = added
    pp = j.get("post_processor")
    if pp and pp.get("type") == "Sequence":  # Llama 3's TemplateProcessing names ids
        for p in pp["processors"]:
            for tok in p.get("special_tokens", {}).values():
                tok["ids"] = [keep]
    return json.dumps(j, ensure_ascii=False)


def tokenizer_seeds():
    for name in ("llama3", "qwen3"):
        put("tokenizer_json", name, trimmed_tokenizer(ASSETS / "tokenizers" / name / "tokenizer.json", 400))
    tiny = {"version": "1.0", "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "NFC"}]},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "decoder": {"type": "ByteLevel"}, "post_processor": None,
            "added_tokens": [{"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
                             {"id": 6, "content": "hi", "single_word": True, "lstrip": True, "rstrip": False, "normalized": True, "special": False}],
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4}, "merges": ["a b", "\u0120 ab"]}}
    put("tokenizer_json", "tiny", json.dumps(tiny))


def recipe_seeds():
    for p in sorted((ROOT / "recipes").glob("*.toml")):
        put("recipe_toml", p.stem, p.read_bytes())


def settings_seeds():
    put("train_settings", "basic", "--training.steps=3\n--training.seq_len\n64\n--optimizer.lr=3e-4\n")
    put("train_settings", "model", "--model.name=qwen3_moe_debug\n--override\nattention=flash\n"
        "--parallelism.data_parallel_shard_degree=2\n--metrics.log_freq=1\n")
    put("train_settings", "schedule", "--lr_scheduler.decay_type=cosine\n--lr_scheduler.warmup_steps=2\n"
        "--training.mixed_precision_param=bfloat16\n--checkpoint.enable\n--checkpoint.interval=5\n")


def text_seeds():
    put("text_source", "lines", b"\x04first line\n\nsecond line\r\nthird\n")
    put("text_source", "paragraphs", b"\x02One.\nTwo.\n\n\nThree \xc3\xa9.\n")
    put("text_source", "delimiter", b"\x06a fortune\n%\nanother\n%\n")
    put("text_source", "jsonl", b'\x01{"text": "hello \\u00e9 \\ud83d\\ude42"}\n\n{"text": "x", "id": 3}\n')
    put("text_source", "jsonl_key", b'\x09{"content": "a\\nb"}\n')


def hf_config_seeds():
    src = (ROOT / "tests" / "models" / "hf_config_test.cc").read_text()
    for name in ("kLlama32_1B", "kQwen3_06B", "kQwen3_30B_A3B"):
        at = src.index(f"const char* {name} = R\"(") + len(f"const char* {name} = R\"(")
        put("hf_config", name[1:].lower(), src[at:src.index(")\";", at)])
    moe = json.loads((CORPUS / "hf_config" / "seed-qwen3_30b_a3b").read_text())
    moe.update({"norm_topk_prob": False, "mlp_only_layers": [0, 3], "decoder_sparse_step": 2,
                "num_hidden_layers": 4})
    put("hf_config", "qwen3_moe_dense_layers", json.dumps(moe))


def ir_seeds(cache):
    texts = []
    for p in sorted(Path(cache).glob("*-program.kce")):
        raw = p.read_bytes()
        at = raw.find(b"graph(")
        if at >= 0 and len(raw) - at < 3000:
            texts.append(raw[at:])
    # A spread: the shortest and some longer ones.
    texts.sort(key=len)
    for n, t in enumerate(texts[:: max(1, len(texts) // 24)][:24]):
        put("ir_text", f"{n:02d}", t)


def trace_seeds():
    # The shape of a profiler trace (kiln/io/chrome_trace.h): a step on the
    # main thread, a program with a kernel and a collective on the device queue.
    meta = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": t, "args": {"name": n}}
            for t, n in ((0, "device queue cpu"), (1, "main"))]
    spans = [
        {"ph": "X", "cat": "program", "name": "graph trainer step", "ts": 10, "dur": 50, "pid": 0, "tid": 0},
        {"ph": "X", "cat": "kernel", "name": "matmul", "ts": 15, "dur": 20, "pid": 0, "tid": 0,
         "args": {"flops": 20000, "bytes": 4000, "types": "f32[2,2] -> f32[2,2]", "program": "graph trainer step"}},
        {"ph": "X", "cat": "comm", "name": "all_reduce", "ts": 40, "dur": 10, "pid": 0, "tid": 0,
         "args": {"group": "dp_shard"}},
        {"ph": "s", "cat": "comm", "name": "collective", "id": 1, "ts": 41, "pid": 0, "tid": 0},
        {"ph": "f", "bp": "e", "cat": "comm", "name": "collective", "id": 1, "ts": 45, "pid": 0, "tid": 0},
        {"ph": "X", "cat": "step", "name": "step 1", "ts": 5, "dur": 75, "pid": 0, "tid": 1},
    ]
    put("trace_summary", "step", json.dumps({"traceEvents": meta + spans, "displayTimeUnit": "ms",
                                             "otherData": {"producer": "kiln", "capture_us": 100}}))


def run_stats_seeds():
    put("cache_run_stats", "two_kinds",
        "program l1 4 2 2 0 0 0\nprogram l3 2 1 1 1024 2048 0.25\ncpu_fused_so l2 9 9 0 99 0 0\n")


def chat_template_seeds():
    for family in ("llama3", "qwen3"):
        config = json.loads((ASSETS / "tokenizers" / family / "tokenizer_config.json").read_text())
        put("chat_template", family, config["chat_template"])
    put("chat_template", "loops",
        "{% set ns = namespace(s='x') %}{% for i in range(3) %}{% set ns.s = ns.s ~ ns.s %}"
        "{{ loop.index }}{% endfor %}{{ ns.s|length }}{{ messages|tojson }}\n---\n"
        '[{"role": "user", "content": "\u00e9"}]')
    put("chat_template", "filters",
        "{%- for m in messages if m.role != 'system' -%}{{ m.content|trim|upper }}"
        "{{ m['role'][::-1] }}{% else %}none{% endfor %}{{ raise_exception('x') if false else 'ok' }}")


def peft_adapter_seeds():
    # As peft's save_pretrained writes it (LoraConfig's fields, most at defaults).
    put("peft_adapter", "peft", json.dumps({
        "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "/models/Qwen3-0.6B",
        "bias": "none", "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True,
        "layers_to_transform": None, "lora_alpha": 32, "lora_dropout": 0.05, "modules_to_save": None,
        "peft_type": "LORA", "r": 16, "rank_pattern": {}, "revision": None,
        "target_modules": ["q_proj", "v_proj", "down_proj"], "task_type": "CAUSAL_LM",
        "use_dora": False, "use_rslora": False}, indent=2))
    put("peft_adapter", "minimal", '{"peft_type": "LORA", "r": 4, "lora_alpha": 8.5, "target_modules": ["o_proj"]}')


def kiln_seeds(kiln):
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "c.txt"
        corpus.write_text("".join(f"line {i} of a small corpus, with words.\n" for i in range(400)))
        small = Path(tmp) / "small.txt"
        small.write_text("".join(f"line {i}, some words.\n" for i in range(12)))
        # A 400-token tokenizer (u16 tokens) and GPT-2's (u32).
        (Path(tmp) / "tok").mkdir()
        (Path(tmp) / "tok" / "tokenizer.json").write_bytes((CORPUS / "tokenizer_json" / "seed-llama3").read_bytes())
        for name, tok in (("u16", Path(tmp) / "tok"), ("u32", ASSETS / "tokenizers" / "gpt2")):
            subprocess.run([kiln, "data", "prepare", "--input", str(small), "--text-split", "line",
                            "--tokenizer", str(tok), "--output", f"{tmp}/shards-{name}",
                            "--val-fraction", "0"], check=True, stdout=subprocess.DEVNULL)
            put("shard", name, sorted(Path(tmp, f"shards-{name}").glob("train-*.bin"))[0].read_bytes())
        subprocess.run([kiln, "train", "--config", "llama3_debug", "--data.path", str(corpus),
                        "--data.text_split", "line", "--job.dump_folder", f"{tmp}/run",
                        "--training.steps", "2", "--training.seq_len", "16", "--training.local_batch_size", "2",
                        "--checkpoint.enable", "--checkpoint.interval", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        manifest = json.loads(Path(tmp, "run", "checkpoint", "step-2", "manifest.json").read_text())
        put("checkpoint_manifest", "one", json.dumps(manifest, indent=2))
        sharded = dict(manifest)
        files = {}
        for stem in ("model", "optimizer"):
            for i in range(2):
                files[f"{stem}-{i + 1:05d}-of-00002.safetensors"] = {"bytes": 1000 + i, "xxh64": "0123456789abcdef"}
        sharded["files"] = files
        sharded["shards"] = {"count": 2, "rows": {"tok_embeddings.weight": 2048, "norm.weight": 64}}
        put("checkpoint_manifest", "sharded", json.dumps(sharded))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    safetensors_seeds()
    tokenizer_seeds()
    recipe_seeds()
    settings_seeds()
    text_seeds()
    chat_template_seeds()
    peft_adapter_seeds()
    hf_config_seeds()
    trace_seeds()
    run_stats_seeds()
    ir_seeds(a.cache)
    kiln_seeds(a.kiln)


if __name__ == "__main__":
    sys.exit(main())
