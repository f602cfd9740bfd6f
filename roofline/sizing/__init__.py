"""Sizing: layers, parameters per component, KV-cache bytes per token, the memory budget, and cutting a card."""
