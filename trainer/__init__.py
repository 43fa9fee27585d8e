"""The trainer: GNN models with the scheduled matmul order, the loop and its Ray actors (docs/trainer.md)."""
