"""The memory panel on the web: server-rendered pages, a little plain JavaScript, served
by the companion's own aiohttp server under `/memory-panel/`."""
