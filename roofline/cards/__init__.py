"""Cards: hardware and model schemas, units, weight/KV formats, and the store that finds and loads card files."""
