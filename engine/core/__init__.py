"""Torch-free serving core: sequences, the block manager and the scheduler (shared by the engine and the simulator)."""
