"""test_megatron.py TOOL PPRUN — pprun's reader of Megatron's indexed dataset against Megatron
itself (megatron-core from PyPI): datasets written by
megatron.core.datasets.indexed_dataset.IndexedDatasetBuilder (uint16 and int32 ids, documents of
one or several sequences) are read back by pprun's reader sample by sample and compared with the
samples GPTDataset builds from them (helpers.build_sample_idx and
GPTDataset._query_document_sample_shuffle_indices, with the document order and the sample order
left unshuffled: what our --data reads without --shuffle); pprun trains from one; and the
token-range check names the file. Run by ctest as py_megatron (tests/py/run.sh interop).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

t0 = time.time()
import torch  # noqa: E402  (indexed_dataset imports it)
from megatron.core.datasets import helpers  # noqa: E402
from megatron.core.datasets.gpt_dataset import GPTDataset  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder  # noqa: E402

TOOL, PPRUN = sys.argv[1], sys.argv[2]
results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def build(prefix, dtype, docs):
    """docs: a list of documents, each a list of sequences (lists of ids). A one-sequence
    document goes in with add_document, a longer one item by item and end_document."""
    b = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in docs:
        if len(doc) == 1:
            b.add_document(torch.tensor(doc[0]), [len(doc[0])])
        else:
            for seq in doc:
                b.add_item(torch.tensor(seq))
            b.end_document()
    b.finalize(prefix + ".idx")


def megatron_samples(prefix, s, epochs):
    """GPTDataset's samples of sequence length s over `epochs` passes, before any shuffle."""
    ds = IndexedDataset(prefix)
    n_seq = len(ds)
    sizes = ds.sequence_lengths.astype(np.int32)
    tokens = int(sizes.sum())
    document_index = np.tile(np.arange(n_seq, dtype=np.int32), epochs)
    sample_index = helpers.build_sample_idx(sizes, document_index, s, epochs, tokens, True, True)
    g = object.__new__(GPTDataset)
    g.dataset, g.document_index, g.sample_index = ds, document_index, sample_index
    g.shuffle_index = np.arange(len(sample_index) - 1)
    g.config = types.SimpleNamespace(add_extra_token_to_sequence=True, sequence_length=s)
    g._pad_token_id = -1
    return [g._query_document_sample_shuffle_indices(i)[0].tolist() for i in range(len(sample_index) - 1)]


def ours(prefix, vocab, s, count):
    r = subprocess.run([TOOL, "data-samples", prefix, str(vocab), str(s), str(count)],
                       capture_output=True, text=True)
    if r.returncode:
        print(r.stderr)
        return []
    return [[int(x) for x in line.split()] for line in r.stdout.splitlines()]


def main():
    print(f"import of torch {torch.__version__} and megatron.core: {time.time() - t0:.1f} s")
    rng = np.random.default_rng(3)
    work = tempfile.mkdtemp(prefix="pp_py_mmidx_")
    for dtype, vocab in ((np.uint16, 50257), (np.int32, 128256)):
        docs = []
        for d in range(40):
            n_seq = 1 if d % 3 else int(rng.integers(2, 4))
            docs.append([rng.integers(0, vocab, int(rng.integers(1, 60))).tolist() for _ in range(n_seq)])
        prefix = os.path.join(work, f"corpus_{dtype.__name__}")
        build(prefix, dtype, docs)
        name = dtype.__name__
        for s, epochs in ((16, 1), (37, 3)):
            want = megatron_samples(prefix, s, epochs)
            got = ours(prefix, vocab, s, len(want))
            check(len(want) > 10 and got == want,
                  f"{name}, s={s}, {epochs} epoch(s): our {len(got)} samples equal GPTDataset's {len(want)}, in order")
        with open(prefix + ".idx", "rb") as fp:
            head = fp.read(34)
        check(head[:9] == b"MMIDIDX\x00\x00" and head[17] == {np.uint16: 8, np.int32: 4}[dtype],
              f"{name}: Megatron wrote the magic and dtype code {head[17]}")

    # pprun trains from a dataset Megatron wrote (the tiny model's vocabulary is 256)
    small = os.path.join(work, "bytes_ids")
    build(small, np.uint16, [[rng.integers(0, 256, 300).tolist()] for _ in range(8)])
    r = subprocess.run([PPRUN, "--model", "tiny", "--data", small, "--seq", "16", "--steps", "3",
                        "--ranks", "2", "--microbatches", "2", "--quiet", "--json"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and '"per_step"' in r.stdout,
          f"pprun --model tiny --data {os.path.basename(small)} trains (exit {r.returncode}) {r.stderr.strip()}")
    r = subprocess.run([PPRUN, "--model", "tiny", "--data", prefix, "--seq", "16", "--steps", "1",
                        "--quiet"], capture_output=True, text=True)
    check(r.returncode == 2 and f"{prefix}.bin: token id" in r.stderr and "vocabulary of 256" in r.stderr,
          f"an id past the model's vocabulary is refused: {r.stderr.strip()}")
    with open(small + ".bin", "r+b") as fp:
        fp.truncate(os.path.getsize(small + ".bin") - 2)
    r = subprocess.run([PPRUN, "--model", "tiny", "--data", small, "--steps", "1", "--quiet"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and f"{small}.bin: " in r.stderr and "fewer than the index" in r.stderr,
          f"a truncated .bin is refused naming it: {r.stderr.strip()}")

    shutil.rmtree(work, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
