"""The transformer the engine runs: layers built from a card's shapes, paged attention, Mamba-2, quantised linears."""
