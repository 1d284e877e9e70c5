"""Training drafts for a target that has no small sibling: one package for every kind of trained draft.

Notation as everywhere: p = target distribution, q = draft distribution, γ (`gamma`) = draft length,
α (`alpha`) = acceptance rate, c = draft/target cost ratio.

A file per step, each resumable, every cached array in safetensors (nothing on disk is unpickled):

- `answers`   the target answers prompts itself (greedy and sampled), with its top-k p per position;
- `texts`     more text for the target to read: prompts it writes for itself, and local documents;
- `features`  one teacher-forced target forward over those texts keeps its hidden state per position;
- `loop`      the shared optimiser loop: schedule, checkpoints, a jsonl loss log, resume;
- `distill`   standalone tiny drafts (a small causal LM trained on the answers' top-k p);
- `head`      feature-level draft heads (EAGLE-style) trained on the captured features;
- `evaluate`  α, c and measured speedup on the EVAL prompts (never trained on);
- `card`      the model card that ships with a draft.
"""
