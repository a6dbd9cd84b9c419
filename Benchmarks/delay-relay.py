#!/usr/bin/env python3
"""A TCP relay on 127.0.0.1 that holds every chunk it reads for DELAY_MS before it writes it on,
in each direction: a link with that one-way delay (twice it round trip) and no bandwidth limit,
for a kernel without `netem`. Both tools of a benchmark go through it. HTTP/2's flow-control
windows are end to end, so the relay's own buffering does not hide them; TCP's windows are the
relay's to each side (its sockets keep reading while a chunk waits), so a tool that keeps too
little in flight shows it here as it would on a real long link.

    Benchmarks/delay-relay.py LISTEN_PORT TARGET_PORT DELAY_MS

Prints "ready" once it listens. Runs until killed."""
import asyncio
import sys

CHUNK = 256 * 1024
# What one direction may hold before it stops reading (a link of 20 ms at 10 GB/s holds 200 MB).
MAX_HELD = 512 * 1024 * 1024


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    held = asyncio.Queue()
    size = [0]
    roomy = asyncio.Event()
    roomy.set()

    async def forward():
        while True:
            due, data = await held.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
            size[0] -= len(data)
            if size[0] < MAX_HELD:
                roomy.set()
        try:
            writer.write_eof()
        except OSError:
            pass

    forwarding = asyncio.create_task(forward())
    try:
        while True:
            await roomy.wait()
            data = await reader.read(CHUNK)
            if not data:
                break
            size[0] += len(data)
            if size[0] >= MAX_HELD:
                roomy.clear()
            held.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    held.put_nowait((loop.time() + delay, None))
    try:
        await forwarding
    except (ConnectionError, OSError):
        pass


async def serve(listen, target, delay):
    async def connected(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay))
        for writer in (client_writer, server_writer):
            writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000))
