"""Retriever trainer (``memory/train_memory_retriever.py``, spec §5).

Faithful defaults: row-level stratified split with no query grouping (AGF-22, leakage AGF-35), target
``truth_label`` with ``case_label`` ignored (AGF-09), ``--use_plan`` **off** (AGF-24), class weights
``[1, max(1, neg/pos)]``, AdamW with no-decay groups, linear warmup, grad clip, evaluation every ``eval_every`` steps
and at each epoch end, ``best.pt`` only with ``save_best`` and a strictly greater score (AUC, or F1 when AUC is NaN),
``last.pt`` always (AGF-10).

Simulator-only options, named and off by default: ``no_stratify`` (upstream flag), ``group_by_query`` (no query in
both partitions), ``freeze_backbone`` (a speed option, **not the reference**: backbone CLS vectors are computed once
per distinct text and only the head trains), ``num_workers`` (upstream uses 2), and a metrics JSON file.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn as nn

from .bank import JsonlLineError, iter_jsonl_strict
from .classifier import UPSTREAM_PM_BACKBONE, MemoryRetrieverClassifier, load_backbone
from .durable import write_with
from .plans import CASE_TOKEN, PLAN_TOKEN, plan_text

NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm", "ln")


def normalize_label(label: Any) -> int:
    """``int(label)`` for int/str (``"true"`` raises), else truthiness; then ``1 if y == 1 else 0`` (spec §10.4)."""
    y = int(label) if isinstance(label, (int, str)) else (1 if label else 0)
    return 1 if y == 1 else 0


class PairJsonlDataset:
    """Training pairs (spec §5.1). ``.samples`` are ``{"natural", "icl", "label"}``; ``.queries`` keeps the query of
    each row (for grouping and leakage measurement). A malformed line, a missing/null field, or a label such as
    ``"true"`` aborts the load."""

    def __init__(self, path: str | os.PathLike[str], use_plan: bool = False, plan_style: str = "pretty",
                 section_tokens: Sequence[str] = (CASE_TOKEN, PLAN_TOKEN)):
        if plan_style not in ("pretty", "raw"):
            raise ValueError(f"plan_style must be 'pretty' or 'raw', not {plan_style!r}")
        case_tok, plan_tok = list(section_tokens)[:2]
        self.samples: list[dict[str, Any]] = []
        self.queries: list[str] = []
        self.lines: list[int] = []
        for ln, obj in iter_jsonl_strict(path):
            if not isinstance(obj, dict):
                raise JsonlLineError(path, ln, f"each line must be a JSON object, not {type(obj).__name__}")
            q, case, label = obj.get("query"), obj.get("case"), obj.get("truth_label")
            if q is None or case is None or label is None:
                raise JsonlLineError(path, ln, "missing query/case/truth_label",
                                     display=f"[line {ln}] missing query/case/truth_label")
            try:
                y = normalize_label(label)
            except ValueError as e:
                raise JsonlLineError(path, ln, f"bad truth_label {label!r}: {e}", display=str(e)) from e
            plan = obj.get("plan")
            parts = [case_tok, str(case)]
            if use_plan and plan is not None:
                parts += [plan_tok, plan_text(plan, plan_style)]
            self.samples.append({"natural": str(q), "icl": "\n".join(parts).strip(), "label": y})
            self.queries.append(str(q))
            self.lines.append(ln)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.samples[i]

    @property
    def labels(self) -> list[int]:
        return [s["label"] for s in self.samples]


def stratified_split_indices(labels: Sequence[int], val_ratio: float, seed: int, stratify: bool = True
                             ) -> tuple[list[int], list[int]]:
    """``(train, val)`` index lists (spec §5.2): row-level, no query grouping (AGF-22)."""
    rng = random.Random(seed)
    n = len(labels)
    if not stratify:
        idx = list(range(n))
        rng.shuffle(idx)
        k = max(1, int(n * val_ratio))
        return idx[k:], idx[:k]
    pos = [i for i, y in enumerate(labels) if y == 1]
    neg = [i for i, y in enumerate(labels) if y != 1]
    rng.shuffle(pos)
    rng.shuffle(neg)
    kp = max(1, int(len(pos) * val_ratio)) if pos else 0
    kn = max(1, int(len(neg) * val_ratio)) if neg else 0
    val = pos[:kp] + neg[:kn]
    train = pos[kp:] + neg[kn:]
    rng.shuffle(train)
    rng.shuffle(val)
    if not train and len(val) > 1:
        train, val = val[1:], val[:1]
    return train, val


def group_split_indices(queries: Sequence[str], labels: Sequence[int], val_ratio: float, seed: int
                        ) -> tuple[list[int], list[int]]:
    """Simulator-only ``--group_by_query`` split: whole queries go to one side, so no query leaks (AGF-35)."""
    first_label: dict[str, int] = {}
    for q, y in zip(queries, labels, strict=True):
        first_label.setdefault(q, y)
    rng = random.Random(seed)
    pos = [q for q, y in first_label.items() if y == 1]
    neg = [q for q, y in first_label.items() if y != 1]
    rng.shuffle(pos)
    rng.shuffle(neg)
    val_q = set(pos[: max(1, int(len(pos) * val_ratio))] if pos else [])
    val_q |= set(neg[: max(1, int(len(neg) * val_ratio))] if neg else [])
    train = [i for i, q in enumerate(queries) if q not in val_q]
    val = [i for i, q in enumerate(queries) if q in val_q]
    return train, val


def query_leakage(queries: Sequence[str], train: Sequence[int], val: Sequence[int]) -> tuple[int, int]:
    """``(validation rows whose query also appears in train, validation rows)`` (AGF-35)."""
    seen = {queries[i] for i in train}
    return sum(1 for i in val if queries[i] in seen), len(val)


def class_weights(labels: Sequence[int], class_weight_pos: float | None = None) -> list[float] | None:
    """``[1.0, w]`` with ``w = class_weight_pos`` or ``max(1, neg / max(1, pos))`` when both classes occur."""
    if class_weight_pos is not None:
        return [1.0, float(class_weight_pos)]
    pos = sum(1 for y in labels if y == 1)
    neg = len(labels) - pos
    if pos and neg:
        return [1.0, max(1.0, neg / max(1, pos))]
    return None


def schedule(n_train: int, batch_size: int, epochs: int, warmup_ratio: float, eval_every: int) -> dict[str, Any]:
    """Batches per epoch, total steps, warmup steps and mid-epoch evaluation steps (spec §10.5)."""
    batches = math.ceil(n_train / batch_size)
    total = batches * epochs
    return {"batches_per_epoch": batches, "total_steps": total, "warmup_steps": int(total * warmup_ratio),
            "step_evals": [s for s in range(1, total + 1) if s % eval_every == 0]}


def binary_metrics(labels: Sequence[int], probs: Sequence[float]) -> dict[str, float]:
    """Accuracy, F1 (``zero_division=0``) and ROC-AUC (NaN when it cannot be computed), threshold 0.5."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    preds = [1 if p >= 0.5 else 0 for p in probs]
    acc = float(accuracy_score(labels, preds)) if labels else float("nan")
    f1 = float(f1_score(labels, preds, zero_division=0)) if labels else 0.0
    try:
        auc = float(roc_auc_score(labels, probs)) if len(set(labels)) == 2 else float("nan")
    except ValueError:
        auc = float("nan")
    return {"acc": acc, "f1": f1, "auc": auc}


def _json_safe(x: Any) -> Any:
    """NaN (an AUC that cannot be computed) becomes ``null`` so the metrics file is strict JSON."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def selection_score(m: dict[str, float]) -> float:
    return m["f1"] if math.isnan(m["auc"]) else m["auc"]


@dataclass
class TrainConfig:
    """Every flag of spec §5.4 with its default (the simulator's backbone default is MiniLM)."""

    train: str
    output_dir: str
    valid: str | None = None
    pretrained_name: str | None = None
    pretrained_local: str | None = None
    seed: int = 42
    val_ratio: float = 0.1
    no_stratify: bool = False
    fp16: bool = False
    save_best: bool = False
    use_plan: bool = False
    batch_size: int = 32
    epochs: int = 3
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    max_len: int = 256
    grad_clip: float = 1.0
    eval_every: int = 500
    class_weight_pos: float | None = None
    plan_style: str = "pretty"
    section_tokens: str = "[CASE] [PLAN]"
    group_by_query: bool = False
    freeze_backbone: bool = False
    num_workers: int = 0
    metrics_json: str | None = None
    atomic_checkpoints: bool = False  # hardened, named: temp file + fsync + os.replace for best/last/metrics (REL-09)


@dataclass
class TrainResult:
    last_path: str
    best_path: str | None
    metrics_path: str
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    n_train: int = 0
    n_val: int = 0
    leakage: tuple[int, int] = (0, 0)
    class_weights: list[float] | None = None
    schedule: dict[str, Any] = field(default_factory=dict)
    best_score: float = -1.0


ProgressFn = Callable[[str, int, int], None]


def _collate(tokenizer: Any, max_len: int):
    def collate(batch: list[dict[str, Any]]) -> tuple[torch.Tensor, ...]:
        e1 = tokenizer([b["icl"] for b in batch], padding=True, truncation=True, max_length=max_len,
                       return_tensors="pt")
        e2 = tokenizer([b["natural"] for b in batch], padding=True, truncation=True, max_length=max_len,
                       return_tensors="pt")
        y = torch.tensor([b["label"] for b in batch], dtype=torch.long)
        return e1["input_ids"], e1["attention_mask"], e2["input_ids"], e2["attention_mask"], y

    return collate


def _param_groups(named: list[tuple[str, nn.Parameter]], weight_decay: float) -> list[dict[str, Any]]:
    decay = [p for n, p in named if not any(nd in n for nd in NO_DECAY)]
    no_decay = [p for n, p in named if any(nd in n for nd in NO_DECAY)]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train(cfg: TrainConfig, *, log: Callable[[str], None] = print, progress: ProgressFn | None = None,
          fault_hook: Callable[[str], None] | None = None) -> TrainResult:
    """Run the trainer; prints the upstream lines through ``log`` and reports ``progress(kind, done, total)``.

    Durable writes go through ``agentfly_sim.durable.write_with`` with the fault-hook steps
    ``agentfly.train.best``, ``agentfly.train.last`` and ``agentfly.train.metrics``. Faithful: ``torch.save`` and
    ``json.dump`` overwrite in place, so a crash mid-save of ``best.pt`` destroys the best checkpoint saved
    before it (REL-08); ``atomic_checkpoints=True`` replaces each file atomically instead."""
    from torch.utils.data import DataLoader, Subset
    from transformers import get_linear_schedule_with_warmup

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(cfg.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = cfg.pretrained_local or cfg.pretrained_name
    if name == UPSTREAM_PM_BACKBONE and not os.path.isdir(name):
        raise FileNotFoundError(f"{name} cannot be loaded offline; pass --pretrained_local or omit it for MiniLM")
    tokenizer, backbone = load_backbone(name)
    tokens = cfg.section_tokens.split()
    ds = PairJsonlDataset(cfg.train, cfg.use_plan, cfg.plan_style, tokens)
    if cfg.valid:
        vds = PairJsonlDataset(cfg.valid, cfg.use_plan, cfg.plan_style, tokens)
        train_rows, val_rows = list(range(len(ds))), list(range(len(vds)))
        train_set, val_set = ds, vds
        train_labels = ds.labels
        leak = (sum(1 for q in vds.queries if q in set(ds.queries)), len(vds))
    else:
        if cfg.group_by_query:
            train_rows, val_rows = group_split_indices(ds.queries, ds.labels, cfg.val_ratio, cfg.seed)
        else:
            train_rows, val_rows = stratified_split_indices(ds.labels, cfg.val_ratio, cfg.seed,
                                                            stratify=not cfg.no_stratify)
        train_set, val_set = Subset(ds, train_rows), Subset(ds, val_rows)
        train_labels = [ds.labels[i] for i in train_rows]
        leak = query_leakage(ds.queries, train_rows, val_rows)
    weights = class_weights(train_labels, cfg.class_weight_pos)
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor(weights, device=device) if weights else None)

    torch.manual_seed(cfg.seed)
    model = MemoryRetrieverClassifier(backbone).to(device)
    collate = _collate(tokenizer, cfg.max_len)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True, collate_fn=collate,
                              num_workers=cfg.num_workers)
    val_loader = DataLoader(val_set, batch_size=cfg.batch_size, shuffle=False, collate_fn=collate,
                            num_workers=cfg.num_workers)

    cache: dict[str, torch.Tensor] = {}
    if cfg.freeze_backbone:
        for p in model.sentence_bert.parameters():
            p.requires_grad_(False)
        texts = list(dict.fromkeys([s["icl"] for s in ds.samples] + [s["natural"] for s in ds.samples]
                                   + ([s["icl"] for s in val_set.samples] + [s["natural"] for s in val_set.samples]
                                      if cfg.valid else [])))
        model.sentence_bert.eval()
        with torch.inference_mode():
            for s in range(0, len(texts), 64):
                chunk = texts[s:s + 64]
                e = tokenizer(chunk, padding=True, truncation=True, max_length=cfg.max_len, return_tensors="pt")
                vecs = model.encode(e["input_ids"].to(device), e["attention_mask"].to(device))
                for t, v in zip(chunk, vecs, strict=True):
                    cache[t] = v.clone()
                if progress:
                    progress("encode", min(s + 64, len(texts)), len(texts))
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True, collate_fn=list,
                                  num_workers=0)
        val_loader = DataLoader(val_set, batch_size=cfg.batch_size, shuffle=False, collate_fn=list, num_workers=0)
    else:
        named = list(model.named_parameters())

    optimizer = torch.optim.AdamW(_param_groups(named, cfg.weight_decay), lr=cfg.lr)
    total = len(train_loader) * cfg.epochs
    warmup = int(total * cfg.warmup_ratio)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)
    use_amp = cfg.fp16 and device == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    def logits_for(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if cfg.freeze_backbone:
            o1 = torch.stack([cache[b["icl"]] for b in batch]).to(device)
            o2 = torch.stack([cache[b["natural"]] for b in batch]).to(device)
            y = torch.tensor([b["label"] for b in batch], dtype=torch.long, device=device)
            return model.head(o1, o2), y
        ids1, m1, ids2, m2, y = (t.to(device) for t in batch)
        return model(ids1, m1, ids2, m2), y

    def evaluate() -> dict[str, float]:
        model.eval()
        labels: list[int] = []
        probs: list[float] = []
        with torch.no_grad():
            for batch in val_loader:
                logits, y = logits_for(batch)
                probs += torch.softmax(logits.float(), 1)[:, 1].tolist()
                labels += y.tolist()
        model.train()
        if cfg.freeze_backbone:
            model.sentence_bert.eval()
        return binary_metrics(labels, probs)

    os.makedirs(cfg.output_dir, exist_ok=True)
    best_path = os.path.join(cfg.output_dir, "best.pt")
    last_path = os.path.join(cfg.output_dir, "last.pt")
    best = -1.0
    evaluations: list[dict[str, Any]] = []

    def consider(m: dict[str, float]) -> None:
        nonlocal best
        score = selection_score(m)
        if cfg.save_best and score > best:
            best = score
            state = model.state_dict()
            write_with(best_path, lambda p: torch.save(state, p), step="agentfly.train.best", hook=fault_hook,
                       atomic=cfg.atomic_checkpoints)
            log(f"  -> best updated: {best_path}")

    global_step = 0
    model.train()
    if cfg.freeze_backbone:
        model.sentence_bert.eval()
    for epoch in range(1, cfg.epochs + 1):
        epoch_loss, batches = 0.0, 0
        for batch in train_loader:
            optimizer.zero_grad()
            with torch.autocast(device_type=device, enabled=use_amp):
                logits, y = logits_for(batch)
                loss = loss_fn(logits.float(), y)
            scaler.scale(loss).backward()
            if cfg.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_([p for _, p in named], cfg.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            global_step += 1
            epoch_loss += float(loss.item())
            batches += 1
            if progress:
                progress("step", global_step, total)
            if cfg.eval_every > 0 and global_step % cfg.eval_every == 0:
                m = evaluate()
                log(f"[step {global_step}] val_acc={m['acc']:.4f} val_f1={m['f1']:.4f} val_auc={m['auc']:.4f}")
                evaluations.append({"kind": "step", "step": global_step, "epoch": epoch, **m})
                consider(m)
        m = evaluate()
        avg = epoch_loss / max(1, batches)
        log(f"[epoch {epoch}] loss={avg:.4f} val_acc={m['acc']:.4f} val_f1={m['f1']:.4f} val_auc={m['auc']:.4f}")
        evaluations.append({"kind": "epoch", "step": global_step, "epoch": epoch, "loss": avg, **m})
        consider(m)
        if progress:
            progress("epoch", epoch, cfg.epochs)
    final_state = model.state_dict()
    write_with(last_path, lambda p: torch.save(final_state, p), step="agentfly.train.last", hook=fault_hook,
               atomic=cfg.atomic_checkpoints)
    log(f"Training done. Final: {last_path}")
    has_best = cfg.save_best and os.path.exists(best_path)
    if has_best:
        log(f"Best checkpoint: {best_path}")
    sched = schedule(len(train_rows), cfg.batch_size, cfg.epochs, cfg.warmup_ratio, cfg.eval_every)
    metrics_path = cfg.metrics_json or os.path.join(cfg.output_dir, "metrics.json")
    result = TrainResult(last_path=last_path, best_path=best_path if has_best else None, metrics_path=metrics_path,
                         evaluations=evaluations, n_train=len(train_rows), n_val=len(val_rows), leakage=leak,
                         class_weights=weights, schedule=sched, best_score=best)
    payload = {"config": asdict(cfg), "n_train": len(train_rows), "n_val": len(val_rows),
               "val_query_leakage": {"shared": leak[0], "total": leak[1]}, "class_weights": weights,
               "schedule": {k: v for k, v in sched.items() if k != "step_evals"}, "evaluations": evaluations,
               "final": evaluations[-1] if evaluations else None, "best_score": best,
               "best_path": result.best_path, "last_path": last_path}
    def dump_metrics(p: str) -> None:
        with open(p, "w", encoding="utf-8") as f:
            json.dump(_json_safe(payload), f, indent=2, default=str)

    write_with(metrics_path, dump_metrics, step="agentfly.train.metrics", hook=fault_hook,
               atomic=cfg.atomic_checkpoints)
    return result
