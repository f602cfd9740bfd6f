"""Calibration: fit efficiencies to measured steps (the engine's or published rows) and validate predictions."""
