"""Make the recycle drafter's warm start: one teacher-forced pass of the target over the shipped answer corpus.

The recycle drafter (specviz.drafters.recycle) keeps, for every token id, what the target expected after it.
A run fills that table from its own verification forwards; this file is where it starts. Each answer of the
suffix corpus (assets/suffix/answers.safetensors: the target's answers to TRAIN prompts and to prompts it wrote
itself, never an EVAL prompt) is read once by the target, placed as the assistant's answer after an empty
user turn in the chat template, and its top-16 next tokens at every answer token are kept
(artifacts/recycle/corpus-top16-*.safetensors, in interleaved shards, so a stopped pass resumes, and `--minutes`
ends it with a sample of the corpus). Each token's row is then
the target's next-token probabilities averaged over its occurrences, the 8 likeliest kept
(`recycle_table.warm_rows`), saved beside the corpus (int32 ids, fp16 probabilities).

    python scripts/make_recycle_table.py
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.drafters.recycle_table import SHIPPED_TABLE, TOP_K, save_table, warm_rows  # noqa: E402
from specviz.drafters.suffix import SHIPPED_CORPUS, read_corpus, tokenizer_fingerprint  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402

WORK = Path(__file__).resolve().parents[1] / "artifacts" / "recycle"
WIDTH = 16  # next tokens kept per position in the pass (the table keeps TOP_K of their averages)
SHARD = 256  # answers per shard


def answer_prefix(tokenizer) -> list[int]:
    """What stands before an answer in a chat run: the template around an empty user turn, the assistant's header."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": ""}], add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@torch.inference_mode()
def top_after(model, vocab: int, sequences: list[list[int]], starts: list[int], width: int = WIDTH, pad: int = 0):
    """The target's top-`width` next tokens and p after every token from starts[i] on, for each sequence (one
    batched forward, padded on the right, which a causal model never reads)."""
    length = max(map(len, sequences))
    batch = torch.tensor([s + [pad] * (length - len(s)) for s in sequences])
    hidden = model.model(batch).last_hidden_state  # [B, L, H]
    head = model.get_output_embeddings()
    out = []
    for i, (sequence, start) in enumerate(zip(sequences, starts)):
        logits = head(hidden[i, start: len(sequence)])[:, :vocab].float()  # [n, V]
        values, ids = logits.topk(width, dim=-1)
        out.append((ids.to(torch.int32), (values - logits.logsumexp(-1, keepdim=True)).exp().half()))
    return out


def pass_over(target, documents: list[list[int]], work: Path, batch: int, minutes: float) -> tuple[list, list, list]:
    """Top-WIDTH ids and p after every token of the documents, [len, WIDTH] each, computed shard by shard.

    Shard s holds every answer whose index is s modulo the shard count, so the shards done when `minutes` run out
    (a stopped pass resumes from its shards) are a sample of the whole corpus. Returns the documents done and
    their rows."""
    from safetensors.torch import load_file, save_file

    prefix = answer_prefix(target.tokenizer)
    work.mkdir(parents=True, exist_ok=True)
    shards = -(-len(documents) // SHARD)
    deadline = time.perf_counter() + minutes * 60
    done, ids, probs = [], [], []
    for s in range(shards):
        path = work / f"corpus-top{WIDTH}-shard{s:02d}of{shards:02d}.safetensors"
        chunk = documents[s::shards]
        if not path.exists():
            if time.perf_counter() > deadline:
                continue
            began = time.perf_counter()
            rows = {}
            order = sorted(range(len(chunk)), key=lambda d: len(chunk[d]))  # similar lengths share a batch
            for b in range(0, len(order), batch):
                part = order[b : b + batch]
                sequences = [prefix + chunk[d] for d in part]
                tops = top_after(target.model, target.vocab_size, sequences, [len(prefix)] * len(part))
                for d, (i, p) in zip(part, tops):
                    rows[f"ids{d}"], rows[f"probs{d}"] = i, p
            save_file(rows, str(path))
            print(f"  shard {s + 1} of {shards}: {time.perf_counter() - began:.0f} s", flush=True)
        rows = load_file(str(path))
        done += chunk
        ids += [rows[f"ids{d}"].numpy() for d in range(len(chunk))]
        probs += [rows[f"probs{d}"].float().numpy() for d in range(len(chunk))]
    return done, ids, probs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--work", default=str(WORK))
    parser.add_argument("--out", default=str(SHIPPED_TABLE))
    parser.add_argument("--minutes", type=float, default=1e9, help="start no new shard after this long")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    target = load_model(args.target)
    corpus, documents = read_corpus(SHIPPED_CORPUS)
    if corpus.get("tokenizer") != tokenizer_fingerprint(target.tokenizer):
        sys.exit("the shipped corpus was made with another tokenizer: make it again for this target first")
    began = time.perf_counter()
    corpus_size = (len(documents), sum(map(len, documents)))
    documents, ids, probs = pass_over(target, documents, Path(args.work), args.batch, args.minutes)
    tokens, rows, p = warm_rows(documents, ids, probs, TOP_K)
    header = {"made": date.today().isoformat(),
              "command": " ".join(["python scripts/make_recycle_table.py", *sys.argv[1:]]),
              "target": args.target, "tokenizer": tokenizer_fingerprint(target.tokenizer),
              "corpus": f"{SHIPPED_CORPUS.name} ({corpus_size[0]} answers, {corpus_size[1]:,} tokens)",
              "read": f"{len(documents)} answers, {sum(map(len, documents)):,} tokens (every k-th answer, k shards)",
              "read_as": "each answer after an empty user turn in the chat template, teacher-forced",
              "row": f"the {TOP_K} likeliest next tokens, their probabilities averaged over the token's occurrences",
              "k": TOP_K, "dtype": str(target.dtype).replace("torch.", ""), "machine": machine(target.device),
              "rows": int(len(tokens)), "seconds": round(time.perf_counter() - began, 1)}
    save_table(Path(args.out), tokens, rows, p, header)
    print(f"{len(tokens):,} token rows from {sum(map(len, documents)):,} corpus tokens -> {args.out} "
          f"({Path(args.out).stat().st_size / 2**20:.2f} MB)")


if __name__ == "__main__":
    main()
