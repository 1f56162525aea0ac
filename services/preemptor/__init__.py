"""The preemptor: issues the stops that plans decided, and accounts for them."""
