"""Reports: plots of the roofline, sweeps and memory budgets (matplotlib, imported lazily)."""
