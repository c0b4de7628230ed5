"""The paper's published numbers, kept as data so reports can set ours beside them.

Source: Patel, "Supersede: Diagnosing and Training the Memory-Update Gap in LLM Agents"
(preprint, 2026), Tables 1-3 and Section 5. These are the paper's measurements, never ours.
"""

from __future__ import annotations

PAPER = "Supersede paper (Patel, 2026)"

# Table 1: LongMemEval knowledge-update, oracle split, n=78, LLM judge (LongMemEval protocol).
TABLE1_ISOLATION = [
    {
        "model": "gpt-4.1-mini",
        "full_context": 0.82,
        "bounded_memory": 0.63,
        "mcnemar_b": 19,
        "mcnemar_c": 4,
        "p_chi2_corrected": 0.0035,
    },
    {
        "model": "gpt-4.1",
        "full_context": 0.91,
        "bounded_memory": 0.64,
        "mcnemar_b": None,
        "mcnemar_c": None,
        "p_chi2_corrected": None,
    },
    {
        "model": "gpt-5.4",
        "full_context": 0.92,
        "bounded_memory": 0.77,
        "mcnemar_b": 13,
        "mcnemar_c": 1,
        "p_chi2_corrected": 0.0033,
    },
]
TABLE1_N = 78

# Table 2: scale study, gpt-4.1-mini, n=25, programmatic matcher.
TABLE2_SCALE = [
    {"split": "oracle", "history": "~2 sessions", "memory": "300 char", "accuracy": 0.68},
    {"split": "_s", "history": "~48 sessions", "memory": "300 char", "accuracy": 0.28},
    {"split": "_s", "history": "~48 sessions", "memory": "~6,500 char (const. ratio)", "accuracy": 0.28},
]
TABLE2_N = 25
# Section 5.2: every one of the 25 answers differs between the two _s conditions; McNemar b = c = 4.
SCALE_ANSWERS_DIFFER = 25
SCALE_MCNEMAR_B_C = (4, 4)

# Section 5.2, environment validation: matcher reward on all 78 questions for gpt-4.1-mini.
ENVIRONMENT_MATCHER_ACCURACY = 0.577
ENVIRONMENT_JUDGE_ACCURACY = 0.63

# Section 4: explicit templated timelines in full context score 100% for frontier models.
SYNTHETIC_FULL_CONTEXT_ACCURACY = 1.00

# Table 3: Qwen2.5-3B, LongMemEval oracle n=78, bounded memory, matcher, by GRPO checkpoint.
TABLE3_TRANSFER = [
    {"checkpoint": "base", "step": 0, "correct": 7, "n": 78},
    {"checkpoint": "step 50", "step": 50, "correct": 7, "n": 78},
    {"checkpoint": "step 100", "step": 100, "correct": 7, "n": 78},
    {"checkpoint": "step 150", "step": 150, "correct": 10, "n": 78},
    {"checkpoint": "step 175", "step": 175, "correct": 13, "n": 78},
]
# Figure 4a: GRPO reward on procedural episodes rises 0.71 -> 0.95; auto-stop at step 174.
TRAINING_REWARD_START, TRAINING_REWARD_END, TRAINING_STOP_STEP = 0.71, 0.95, 174
