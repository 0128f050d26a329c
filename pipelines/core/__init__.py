"""The shared plumbing: config, catalog, data, models, loop, results, environment. No chapter names."""
