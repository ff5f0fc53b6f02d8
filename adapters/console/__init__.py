"""The console adapter: a local terminal conversation with the companion."""
