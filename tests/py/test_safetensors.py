"""test_safetensors.py TOOL PPRUN — the runtime's safetensors module against the real consumers:
the safetensors package (its Rust reader and writer), torch, and huggingface_hub's sharding (what
transformers' save_pretrained uses). Run by ctest as py_safetensors (tests/py/run.sh interop).

 - a file the safetensors package wrote, copied through pp_io_tool (our reader, then our
   writer), is that file again byte for byte (same layout rules, same header text);
 - what our writer converts to BF16 / F16 is what torch and NumPy round to, bit for bit; torch
   loads it as torch.bfloat16;
 - a sharded checkpoint written by huggingface_hub.save_torch_state_dict reads as one, and ours
   splits into the same shards with the same index as split_torch_state_dict_into_shards;
 - a wrong shape is refused naming the file, the tensor and both shapes.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import safetensors
from safetensors import TensorSpec, deserialize, safe_open, serialize_file

TOOL = sys.argv[1]
results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def tool(*args, expect=0):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != expect:
        print(f"pp_io_tool {' '.join(args)}: exit {r.returncode}, expected {expect}\n{r.stderr}")
    return r


def f32_to_bf16_bits(x):
    """Round to nearest even as c10::BFloat16's round_to_nearest_even; NaN -> 0x7FC0."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def make_tensors(rng):
    """Name -> (safetensors dtype string, shape, raw little-endian bytes, fp32 values)."""
    t = {}
    f = rng.standard_normal(3 * 5 * 7).astype(np.float32) * np.float32(1e3)
    f[:6] = [np.inf, -np.inf, np.nan, -0.0, np.float32(1e-45), np.float32(3.4e38)]
    t["model.layers.0.self_attn.q_proj.weight"] = ("float32", [3, 5, 7], f)
    h = rng.standard_normal(64).astype(np.float16)
    h[0], h[1] = np.float16(6.1e-5), np.float16(-65504)
    t["model.layers.0.mlp.up_proj.weight"] = ("float16", [8, 8], h.astype(np.float32))
    b = rng.integers(0, 0x10000, 96, dtype=np.uint64).astype(np.uint16)
    b = b[((b & 0x7F80) != 0x7F80) | ((b & 0x7F) == 0)][:48]  # no NaN patterns
    t["model.embed_tokens.weight"] = ("bfloat16", [6, 8], bf16_bits_to_f32(b))
    t["model.norm.weight"] = ("float32", [], np.array([1.25], np.float32))
    t["empty"] = ("bfloat16", [0, 3], np.zeros(0, np.float32))
    t['quote"and\\ñame'] = ("float32", [2], np.array([1.0, -2.0], np.float32))
    return t


def stored(dtype, v):
    """v (fp32) as the array of the stored dtype (bf16 as its uint16 bit patterns)."""
    if dtype == "float32":
        return np.ascontiguousarray(v, np.float32)
    if dtype == "float16":
        return v.astype(np.float16)
    return f32_to_bf16_bits(v)


def write_reference(tensors, path, metadata):
    """The safetensors package's own writer (serialize_file over TensorSpec, as its numpy and
    torch front ends call it), bf16 included (which NumPy has no dtype for)."""
    keep = {k: stored(d, v) for k, (d, _, v) in tensors.items()}
    specs = {k: TensorSpec(dtype=d, shape=s, data_ptr=keep[k].ctypes.data, data_len=keep[k].nbytes)
             for k, (d, s, _) in tensors.items()}
    serialize_file(specs, path, metadata=metadata)


def by_name(path):
    with open(path, "rb") as fp:
        return dict(deserialize(fp.read()))


def main():
    rng = np.random.default_rng(7)
    tensors = make_tensors(rng)
    work = tempfile.mkdtemp(prefix="pp_py_st_")
    ref = os.path.join(work, "ref.safetensors")
    write_reference(tensors, ref, {"format": "pt"})

    # 1. the reference's file, read and written again by us, is the same file
    copy = os.path.join(work, "copy.safetensors")
    r = tool("st-copy", ref, copy, "--as", "keep", "--meta", "format=pt")
    same = r.returncode == 0 and open(ref, "rb").read() == open(copy, "rb").read()
    check(same, f"safetensors {safetensors.__version__}'s file copied by pp_io_tool is the same bytes")
    with safe_open(copy, framework="numpy") as fp:
        check(fp.metadata() == {"format": "pt"}, "metadata read back by safe_open")
        check(sorted(fp.keys()) == sorted(tensors), "every tensor name read back by safe_open")

    # 2. conversions: bf16 as torch rounds, f16 as NumPy rounds, f32 exact
    for target, sdt in (("bf16", "BF16"), ("f16", "F16"), ("f32", "F32")):
        out = os.path.join(work, f"as-{target}.safetensors")
        tool("st-copy", ref, out, "--as", target, "--meta", "format=pt")
        got = by_name(out)
        for name, (_, shape, v) in tensors.items():
            g = got.get(name)
            if g is None or g["dtype"] != sdt or list(g["shape"]) != shape:
                check(False, f"--as {target}: {name} missing or with dtype/shape {g and g['dtype']}")
                continue
            data = np.frombuffer(g["data"], {"BF16": np.uint16, "F16": np.uint16, "F32": np.uint32}[sdt])
            if sdt == "BF16":
                want = f32_to_bf16_bits(v)
            elif sdt == "F16":
                with np.errstate(over="ignore"):  # past 65504: infinity, as intended
                    want = v.astype(np.float16).view(np.uint16)
            else:
                want = v.view(np.uint32)
            nan = np.isnan(v)
            ok = np.array_equal(data[~nan], want[~nan])
            if sdt == "F16":  # a NaN stays a NaN (NumPy keeps the payload's top bits too)
                ok &= bool(np.all(((data[nan] & 0x7C00) == 0x7C00) & ((data[nan] & 0x3FF) != 0)))
            else:
                ok &= np.array_equal(data[nan], want[nan])
            check(ok, f"--as {target}: {name} {shape} equal bit for bit to {'torch-style' if sdt == 'BF16' else 'NumPy'} rounding")

    try:
        import torch
        from safetensors.torch import load_file
    except ImportError:
        print("torch is not importable: the torch checks are skipped")
        torch = None
    if torch is not None:
        got = load_file(os.path.join(work, "as-bf16.safetensors"))
        for name, (_, shape, v) in tensors.items():
            t = got[name]
            want = torch.from_numpy(v.copy()).reshape(shape).to(torch.bfloat16)
            nan = torch.isnan(want)
            ok = t.dtype == torch.bfloat16 and list(t.shape) == shape
            ok = ok and torch.equal(t.view(torch.int16)[~nan], want.view(torch.int16)[~nan])
            ok = ok and bool(torch.isnan(t[nan]).all())
            check(ok, f"torch {torch.__version__} loads {name} as bfloat16 equal to its own fp32->bf16")

        # 3. sharding: huggingface_hub writes, we read; we write, it agrees on the split
        from huggingface_hub import save_torch_state_dict, split_torch_state_dict_into_shards

        state = {k: torch.from_numpy(v.copy()).reshape(s).to({"float32": torch.float32,
                 "float16": torch.float16, "bfloat16": torch.bfloat16}[d])
                 for k, (d, s, v) in sorted(tensors.items())}
        hub = os.path.join(work, "hub")
        os.makedirs(hub)
        save_torch_state_dict(state, hub, max_shard_size=200)
        shards = sorted(f for f in os.listdir(hub) if f.endswith(".safetensors"))
        check(len(shards) > 2 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors",
              f"huggingface_hub wrote {len(shards)} shards named as transformers names them")
        one = os.path.join(work, "one.safetensors")
        r = tool("st-copy", hub, one, "--as", "keep", "--meta", "format=pt")
        check(r.returncode == 0 and open(one, "rb").read() == open(ref, "rb").read(),
              "its sharded checkpoint, read as one by us and written as one file, is the reference's file")
        ours = os.path.join(work, "ours")
        tool("st-copy", ref, ours, "--as", "keep", "--shard", "200", "--meta", "format=pt")
        split = split_torch_state_dict_into_shards(state, max_shard_size=200)
        with open(os.path.join(ours, "model.safetensors.index.json")) as fp:
            index = json.load(fp)
        check(index["weight_map"] == split.tensor_to_filename,
              "our shards hold the tensors split_torch_state_dict_into_shards puts in them")
        check(index["metadata"]["total_size"] == split.metadata["total_size"],
              f"our index's total_size {index['metadata']['total_size']} is huggingface_hub's")
        loaded = {}
        for f in sorted(set(index["weight_map"].values())):
            with safe_open(os.path.join(ours, f), framework="pt") as fp:
                check(fp.metadata() == {"format": "pt"}, f"{f} has the metadata transformers checks")
                loaded.update({k: fp.get_tensor(k) for k in fp.keys()})
        def same_bits(a, b):
            return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
                a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))

        check(sorted(loaded) == sorted(state) and all(same_bits(loaded[k], state[k]) for k in state),
              "every tensor of our shards loads in torch equal to the original, bit for bit")

    # 4. a wrong shape, as a weight loader meets it
    name = "model.layers.0.mlp.up_proj.weight"
    r = tool("st-expect", ref, name, "11,8", expect=2)
    want = f"{ref}: tensor {name}: shape [8, 8] expected [11, 8]"
    check(r.returncode == 2 and want in r.stderr, f"a wrong shape is refused: {r.stderr.strip()}")

    shutil.rmtree(work, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
