"""Everything stored about a person: the database, repositories, embeddings and the
three memory tiers. The bottom layer: it imports no other package of the project."""
