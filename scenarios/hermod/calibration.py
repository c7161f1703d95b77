"""The compute model against the thesis's own profile (seed 004, §5.2.2, Case I).

``python -m scenarios.hermod.calibration`` prints, per Table 5.5 model at its
parallelism, what :mod:`workloads.moe` makes of one microbatch's forward
pass on a GPU (312 TFLOP/s x 0.5, the module docstring's "Compute"): the
attention task of one layer, the expert compute of one layer at balanced
routing (``tokens x topk / ep`` routed tokens per expert GPU, ``etp``-shared),
a pipeline stage's layers, and a PP flow alone on a 100 Gbit/s NIC (its
wire bytes). The thesis: "average attention and gate computation times of
2.4ms and 0.6ms, respectively. Given that PP coflows complete in ~4 ms on
average, there is potential for PP-EP coflow overlap" (Case I, profiled on
Mixtral-8x7B, §5.1.2's production cluster of H-series GPUs; parallelism and
microbatch size not given). Its ratio, attention + gate over a PP
coflow, is 3.0 / 4 = 0.75; the ``ratio`` column is ours.

This is a check, not a fit: nothing here feeds back into the model.
"""

from __future__ import annotations

from railbed.units import wire_bytes
from workloads.moe import BYTES, PRESETS, _shape

THESIS_ATTN_GATE_MS, THESIS_PP_MS = 2.4 + 0.6, 4.0
NIC = 100e9
TFLOPS, EFFICIENCY = 312.0, 0.5
DP = {"qwen-moe-12l": 8, "mixtral-8x7b": 16, "gpt3-13b": 2, "qwen-moe-24l": 16, "mixtral-8x22b": 16, "gpt3-175b": 16}


def rows(nic_bps: float = NIC) -> list[dict]:
    """One row per Table 5.5 model (times in ms)."""
    out = []
    for model in PRESETS:
        s = _shape(model, {}, DP[model], None, 1, TFLOPS * 1e12 * EFFICIENCY)
        s.etp = s.tp if s.experts and s.dp % s.ep == 0 else 1
        attn = s.attn_time()
        expert = s.expert_time(s.tokens * s.topk * s.etp // max(s.ep, 1)) / s.etp if s.experts else 0.0
        pp_bytes = s.tokens * s.hidden * BYTES
        pp = 8 * wire_bytes(pp_bytes) / nic_bps
        per_stage = s.layers // s.pp
        out.append({
            "model": model, "tp": s.tp, "tokens_per_gpu": s.tokens, "attn_ms": attn * 1e3,
            "expert_ms": expert * 1e3, "stage_fwd_ms": per_stage * (attn + expert) * 1e3,
            "pp_MB": pp_bytes / 1e6, "pp_ms": pp * 1e3, "ratio": attn / pp,
        })  # fmt: skip
    return out


def table(nic_bps: float = NIC) -> str:
    head = ("| model (Table 5.5) | TP | tokens/GPU | attention, 1 layer | experts, 1 layer | stage forward | "
            f"PP flow | PP alone at {nic_bps / 1e9:g} Gbit/s | attention / PP |")  # fmt: skip
    lines = [head, "|" + " --- |" * 9]
    for r in rows(nic_bps):
        lines.append(
            f"| {r['model']} | {r['tp']} | {r['tokens_per_gpu']} | {r['attn_ms']:.2f} ms | {r['expert_ms']:.2f} ms | "
            f"{r['stage_fwd_ms']:.1f} ms | {r['pp_MB']:.1f} MB | {r['pp_ms']:.2f} ms | {r['ratio']:.2f} |"
        )
    lines.append(f"| thesis, Case I (Mixtral-8x7B, H-series) | ? | ? | {THESIS_ATTN_GATE_MS:.1f} ms (+ gate) | ? | ? "
                 f"| ? | ~{THESIS_PP_MS:.0f} ms | {THESIS_ATTN_GATE_MS / THESIS_PP_MS:.2f} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
