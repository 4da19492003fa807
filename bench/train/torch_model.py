#!/usr/bin/env python3
"""The PyTorch twin of loopscale's acceptance model, for bench/train/pytorch_compare.sh (issue 18).

The same architecture, size, loss and optimiser as `loopscale train --d-model 256 --heads 2
--prelude 2 --coda 2 --recur-layers 4 --r 4 --seq-len 256 --batch 16` (the CLI's defaults for
everything else: vocab 256 padded to a multiple of 64, linear injection, full BPTT, the
per-recurrence state norm, relu^2 MLP x4, softcap 15, the adamw recipe), trained in fp32 on random
byte tokens, timed, and reported as one JSON line:
  {"tokens_per_s": ..., "params": ..., "torch": ..., "compile": ..., ...}
What it mirrors in loopscale, by file (include/loopscale/...):
  train/model.hpp        forward() 293-322: embedding -> norm.embedding -> prelude -> recurrence
                         -> coda -> norm.final -> lm_head -> softcap -> cross-entropy;
                         layer_forward() 638-657: pre-norm residual layer, QK-norm then RoPE;
                         recur_forward() 739-762 + new_state() 697-702: s starts as e, each
                         recurrence u = W [e ; s], y = block(u), s = norm.recur(y);
                         layout_params() 441-459, add_layer() 407-439: the tensors and their order;
                         init() 241-281: the scaled-normal initialisation
  train/kernels/*.hpp    rmsnorm (eps 1e-6, learned scale; QK-norm without), rope (rotate half,
                         base 10000), attention (causal, 1/sqrt(head_dim)), mlp (relu^2, no bias),
                         inject (linear, W = [I | 0] at the start), loss (15 tanh(z / 15), CE over
                         the real vocabulary), linear (no bias anywhere)
  train/optim.hpp        AdamW (0.9, 0.95, eps 1e-8), decoupled weight decay 0.1 on the matrix group
                         only (wqkv, wo, w1, w2), global-norm clip 1.0, warmup 2% then cosine to 0.1
  train/train_config.hpp TrainConfig defaults (recipe adamw, lr 3e-3, softcap 15)
The twin is checked, not assumed: --check-run RUN_DIR loads the weights of a finished `loopscale
train` run (checkpoint.bin) into this model and recomputes the run's validation loss on the same
windows; pytorch_compare.sh requires agreement to 1e-4 (it agrees to about 1e-7). What is not
reproduced: the initial draws (same distributions, another random stream) and the data (random
bytes here, the corpus there), neither of which changes the speed; and the attention's execution
(SDPA's fused kernel against loopscale's full T x T masked GEMMs), the same function.
Timing: each step is timed alone (time.perf_counter around zero_grad, forward, backward, clip and
optimiser step, with loss.item() inside so the step is complete); tokens/s is batch * seq_len *
(steps - warmup) over the summed times of the steps after the first `warmup` ones. torch.compile
compiles lazily in the first step (and may recompile in the second), so the compile time falls in
the warm-up steps and is reported separately as warmup_s, never in tokens/s.
"""
import argparse
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of tokens/s (compile happens here)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (forward and backward)")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode (default, max-autotune-no-cudagraphs, ...)")
    p.add_argument("--seed", type=int, default=1)
    # The acceptance model (bench/train/bench_train.cpp acceptance_spec; threads_under_load.sh `large`).
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--prelude", type=int, default=2)
    p.add_argument("--recur-layers", type=int, default=4)
    p.add_argument("--r", type=int, default=4)
    p.add_argument("--coda", type=int, default=2)
    p.add_argument("--mlp-mult", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--vocab-multiple", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--softcap", type=float, default=15.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--count-only", action="store_true", help="print the parameter count and stop")
    p.add_argument("--check-run", metavar="RUN_DIR",
                   help="instead of training: load the parameters of a finished `loopscale train` run (its checkpoint.bin) "
                   "into this model, compute the validation loss on the run's validation sample of --data, and compare it "
                   "with the run's summary.json val_loss (same weights, same windows: the forward passes must agree)")
    p.add_argument("--data", default="data/corpus", help="with --check-run: the corpus the run trained on")
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    return a


args = parse_args()
# Threads before torch loads: OpenMP reads OMP_NUM_THREADS once, and Inductor's generated kernels
# use torch.get_num_threads() (set again below).
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ.setdefault("MKL_NUM_THREADS", str(args.threads))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass
torch.set_float32_matmul_precision("highest")  # fp32 GEMMs, as loopscale (no TF32 / bf16 shortcuts)

RMS_EPS = 1e-6  # kernels/rmsnorm.hpp rms_eps


def rms_norm(x, weight):
    """kernels/rmsnorm.hpp: y = x / sqrt(mean(x^2) + 1e-6) * g (g None: parameter-free)."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, RMS_EPS)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return y if weight is None else y * weight


def rope_tables(seq_len, head_dim, base=10000.0):
    """kernels/rope.hpp rope_tables: angle t * base^(-2j/q) for j < q/2, in double, rounded once."""
    half = head_dim // 2
    j = torch.arange(half, dtype=torch.float64)
    t = torch.arange(seq_len, dtype=torch.float64)
    ang = t[:, None] * torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * j / head_dim)[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()  # (T, q/2) each


def apply_rope(x, cos, sin):
    """kernels/rope.hpp rope_apply: pairs (j, j + q/2) of each head ("rotate half").
    x: (B, T, heads, q); cos, sin: (T, q/2)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


class Layer(nn.Module):
    """model.hpp layer_forward (638-657), add_layer (407-439): pre-norm, no biases.
    x_mid = x + Wo attn(rope(qknorm(Wqkv norm1(x)))),  out = x_mid + W2 relu2(W1 norm2(x_mid))."""

    def __init__(self, d, heads, hidden):
        super().__init__()
        self.h, self.q = heads, d // heads  # kv heads = heads (no grouping)
        self.wqkv = nn.Linear(d, 3 * heads * self.q, bias=False)  # rows [Q heads | K heads | V heads]
        self.wo = nn.Linear(heads * self.q, d, bias=False)
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        self.norm1 = nn.Parameter(torch.ones(d))
        self.norm2 = nn.Parameter(torch.ones(d))

    def forward(self, x, cos, sin):
        B, T, d = x.shape
        qkv = self.wqkv(rms_norm(x, self.norm1)).view(B, T, 3, self.h, self.q)
        q, k, v = qkv.unbind(2)
        # QK-norm: parameter-free RMSNorm of each Q and K head (rmsnorm_forward_strided), then RoPE.
        q = apply_rope(rms_norm(q, None), cos, sin)
        k = apply_rope(rms_norm(k, None), cos, sin)
        # Causal softmax(Q K^T / sqrt(q)) V (kernels/attention.hpp).
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(B, T, self.h * self.q))
        h = F.relu(self.w1(rms_norm(x, self.norm2))).square()  # relu^2 (kernels/mlp.hpp)
        return x + self.w2(h)


class LoopedTransformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        d = a.d_model
        self.d, self.r, self.vocab, self.softcap = d, a.r, a.vocab, a.softcap
        vp = -(-a.vocab // a.vocab_multiple) * a.vocab_multiple if a.vocab_multiple > 1 else a.vocab  # padded_vocab
        hidden = d * a.mlp_mult
        # Tensors in loopscale's order (model.hpp layout_params 441-459).
        self.embedding = nn.Parameter(torch.empty(vp, d))
        self.lm_head = nn.Parameter(torch.empty(vp, d))  # untied
        self.norm_embedding = nn.Parameter(torch.ones(d))
        self.norm_recur = nn.Parameter(torch.ones(d))  # one scale for every recurrence
        self.norm_final = nn.Parameter(torch.ones(d))
        self.prelude = nn.ModuleList(Layer(d, a.heads, hidden) for _ in range(a.prelude))
        self.block = nn.ModuleList(Layer(d, a.heads, hidden) for _ in range(a.recur_layers))  # shared over r
        self.inject = nn.Parameter(torch.empty(d, 2 * d))  # inject.W = [We | Ws], u = W [e ; s]
        self.coda = nn.ModuleList(Layer(d, a.heads, hidden) for _ in range(a.coda))
        cos, sin = rope_tables(a.seq_len, d // a.heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.init_weights(a.prelude + a.recur_layers * a.r + a.coda, a.seed)

    @torch.no_grad()
    def init_weights(self, depth, seed):
        """model.hpp init(), scaled_normal (the adamw recipe's): embedding N(0, 1); wqkv, w1
        N(0, 1/fan_in); wo, w2 that over sqrt(2 depth); lm_head N(0, 0.001^2); norms 1; inject [I | 0].
        (Same distributions, not the same draws: loopscale's SplitMix64 stream is not reproduced.)"""
        g = torch.Generator().manual_seed(seed)
        self.embedding.normal_(0, 1, generator=g)
        self.lm_head.normal_(0, 0.001, generator=g)
        for layer in [*self.prelude, *self.block, *self.coda]:
            for lin in (layer.wqkv, layer.w1):
                lin.weight.normal_(0, lin.weight.shape[1] ** -0.5, generator=g)
            for lin in (layer.wo, layer.w2):
                lin.weight.normal_(0, lin.weight.shape[1] ** -0.5 / math.sqrt(2 * depth), generator=g)
        self.inject.zero_()
        self.inject[:, : self.d].copy_(torch.eye(self.d))

    def forward(self, tokens, targets):
        cos, sin = self.cos, self.sin
        x = rms_norm(F.embedding(tokens, self.embedding), self.norm_embedding)
        for layer in self.prelude:
            x = layer(x, cos, sin)
        e = x
        s = e  # linear injection: the state starts as e
        we, ws = self.inject[:, : self.d], self.inject[:, self.d :]
        for _ in range(self.r):  # full BPTT: autograd keeps every recurrence
            u = F.linear(e, we) + F.linear(s, ws)  # kernels/inject.hpp inject_linear_forward
            for layer in self.block:
                u = layer(u, cos, sin)
            s = rms_norm(u, self.norm_recur)  # StateNorm::per_recurrence (model.hpp new_state)
        x = s
        for layer in self.coda:
            x = layer(x, cos, sin)
        logits = F.linear(rms_norm(x, self.norm_final), self.lm_head)[..., : self.vocab]
        if self.softcap > 0:
            logits = self.softcap * torch.tanh(logits / self.softcap)
        return F.cross_entropy(logits.reshape(-1, self.vocab).float(), targets.reshape(-1))

    def matrices(self):
        """ParamGroup::matrix (the one with weight decay): every layer's wqkv, wo, w1, w2."""
        return [lin.weight for layer in [*self.prelude, *self.block, *self.coda] for lin in (layer.wqkv, layer.wo, layer.w1, layer.w2)]


def schedule(step, steps, lr, warmup_frac=0.02, final_frac=0.1):
    """optim.hpp Schedule::at with the adamw recipe's warmup 0.02 and cosine decay to 0.1."""
    wu = int(warmup_frac * steps)
    if step < wu:
        return lr * (step + 1) / wu
    span = max(1, steps - wu - 1)
    p = min(1.0, (step - wu) / span)
    return lr * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def loopscale_tensors(model):
    """The model's tensors in loopscale's flat parameter order (model.hpp layout_params 441-459,
    add_layer 407-439), each row-major as loopscale stores it (a Linear weight is (out, in) there too)."""
    def layer(l):
        return [l.wqkv.weight, l.wo.weight, l.w1.weight, l.w2.weight, l.norm1, l.norm2]
    out = [model.embedding, model.lm_head, model.norm_embedding, model.norm_recur, model.norm_final]
    for l in model.prelude:
        out += layer(l)
    for l in model.block:
        out += layer(l)
    out.append(model.inject)
    for l in model.coda:
        out += layer(l)
    return out


@torch.no_grad()
def check_run(model, run_dir, data_dir):
    """Loads checkpoint.bin (train/checkpoint.hpp: "LSCKPT01" | u32 version | u32 bytes per value |
    u64 JSON length | JSON | u64 n | params[n] | ...) and evaluates the validation sample that
    trainer.hpp evaluate() uses (data.hpp ValidationSet: eval_batches * batch windows of seq_len + 1
    tokens, starts evenly spaced over val.bin; eval_batches = max(1, eval_tokens / (batch * seq_len));
    the loss is the mean over forward passes of `batch` windows)."""
    import struct
    with open(os.path.join(run_dir, "checkpoint.bin"), "rb") as f:
        head = f.read(24)
        if head[:8] != b"LSCKPT01":
            raise SystemExit(f"{run_dir}/checkpoint.bin is not a loopscale checkpoint")
        version, value_bytes, jlen = struct.unpack("<IIQ", head[8:24])
        meta = json.loads(f.read(jlen))
        (n,) = struct.unpack("<Q", f.read(8))
        if value_bytes != 4:
            raise SystemExit(f"checkpoint values have {value_bytes} bytes; expected fp32")
        flat = torch.frombuffer(bytearray(f.read(4 * n)), dtype=torch.float32)
    tensors = loopscale_tensors(model)
    if sum(t.numel() for t in tensors) != n:
        raise SystemExit(f"the checkpoint holds {n} parameters, this model {sum(t.numel() for t in tensors)}")
    at = 0
    for t in tensors:
        t.copy_(flat[at : at + t.numel()].view_as(t))
        at += t.numel()
    cfg = meta.get("config", {})
    batch, seq_len, eval_tokens = cfg.get("batch", args.batch), cfg.get("seq_len", args.seq_len), cfg.get("eval_tokens", 1 << 17)
    path = os.path.join(data_dir, "val.bin")
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != b"LSTOKENS":
        raise SystemExit(f"{path} is not an LSTOKENS file")
    tver, tbytes = struct.unpack("<II", raw[8:16])
    (count,) = struct.unpack("<Q", raw[24:32])
    hdr = 48 if tver >= 2 else 40  # data/token_file.hpp
    dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[tbytes]
    toks = torch.frombuffer(bytearray(raw[hdr : hdr + count * tbytes]), dtype=dtype).to(torch.int64)
    if tbytes == 2:
        toks &= 0xFFFF
    windows = max(1, eval_tokens // (batch * seq_len)) * batch
    span = count - seq_len
    starts = [span * i // windows for i in range(windows)]
    losses = []
    for k in range(0, windows, batch):
        w = torch.stack([toks[s : s + seq_len + 1] for s in starts[k : k + batch]])
        losses.append(model(w[:, :-1], w[:, 1:]).item())
    ours = sum(losses) / len(losses)
    with open(os.path.join(run_dir, "summary.json")) as f:
        theirs = json.load(f)["val_loss"]
    return {"val_loss_loopscale": theirs, "val_loss_torch": ours, "rel_diff": abs(ours - theirs) / abs(theirs),
            "windows": windows, "params": n, "checkpoint_step": meta.get("step")}


def main():
    torch.manual_seed(args.seed)
    model = LoopedTransformer(args)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    mkldnn = torch.backends.mkldnn.is_available()
    if args.count_only:
        print(json.dumps({"params": params, "torch": torch.__version__}))
        return
    if args.check_run:
        print(json.dumps(check_run(model, args.check_run, args.data)))
        return
    mats = set(id(p) for p in model.matrices())
    groups = [
        {"params": [p for p in model.parameters() if id(p) in mats], "weight_decay": 0.1},
        {"params": [p for p in model.parameters() if id(p) not in mats], "weight_decay": 0.0},
    ]
    # The fastest AdamW on the CPU: fused (torch >= 2.4 has a CPU kernel), else foreach.
    try:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
        adamw = "fused"
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
        adamw = "foreach"
    step_fn = torch.compile(model, mode=None if args.compile_mode == "default" else args.compile_mode, fullgraph=True) if args.compile else model
    gen = torch.Generator().manual_seed(args.seed)
    n_tok = args.batch * args.seq_len
    times, losses = [], []
    for step in range(args.steps):
        # Random byte tokens (the content does not matter for speed); inputs and targets shifted by one.
        seq = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=gen)
        inp, tgt = seq[:, :-1], seq[:, 1:]
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = schedule(step, args.steps, args.lr)
        opt.zero_grad(set_to_none=True)
        loss = step_fn(inp, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)  # loopscale clips every step
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
        print(f"step {step + 1}/{args.steps}  loss {losses[-1]:.4f}  {n_tok / times[-1]:.0f} tok/s", file=sys.stderr, flush=True)
    timed = times[args.warmup :]
    out = {
        "tokens_per_s": n_tok * len(timed) / sum(timed),
        "params": params,
        "torch": torch.__version__,
        "compile": bool(args.compile),
        "compile_mode": args.compile_mode if args.compile else None,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "warmup_s": sum(times[: args.warmup]),
        "step_ms_median": 1000 * sorted(timed)[len(timed) // 2],
        "step_tokens_per_s": [round(n_tok / t, 1) for t in times],  # every step, warm-up included
        "adamw": adamw,
        "mkldnn": mkldnn,
        "loss_first": losses[0],
        "loss_last": losses[-1],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
