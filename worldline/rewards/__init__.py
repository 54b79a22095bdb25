"""Rewards for RL on world-model data: rule verifiers and the verl reward function."""
