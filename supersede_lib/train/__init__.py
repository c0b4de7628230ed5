"""GRPO training on the rollout core: the bounded-memory agent's every turn becomes a sample whose
advantage is its trajectory's, rewarded by the same matcher as evaluation."""
