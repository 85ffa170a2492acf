// Placeholder until the first pass lands.
