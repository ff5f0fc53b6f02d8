"""Chat platforms: each adapter translates platform events into the core's
`IncomingMessage` and renders its `Reply`."""
