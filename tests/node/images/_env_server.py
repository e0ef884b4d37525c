"""A tiny OpenEnv-protocol env server in the standard library only, for an image built in
the tests: ``GET /health`` answers 200, ``/ws`` speaks the WebSocket messages OpenEnv's
client sends (``reset``, ``step``, ``state``, ``close``); it echoes an action's ``text``, the
reward its length. Written for any python3 from 3.5 on: it runs in the image's own.
"""

SOURCE = r"""
import base64, hashlib, json, os, socket, struct, sys, threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_frame(conn):
    head = read_exact(conn, 2)
    opcode, length = head[0] & 15, head[1] & 127
    if length == 126:
        length = struct.unpack("!H", read_exact(conn, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", read_exact(conn, 8))[0]
    mask = read_exact(conn, 4) if head[1] & 128 else b"\0\0\0\0"
    body = bytearray(read_exact(conn, length))
    for i in range(len(body)):
        body[i] ^= mask[i % 4]
    return opcode, bytes(body)


def send_frame(conn, opcode, body):
    n = len(body)
    if n < 126:
        head = struct.pack("!BB", 128 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 128 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 128 | opcode, 127, n)
    conn.sendall(head + body)


def episode(conn):
    steps = 0
    while True:
        opcode, body = read_frame(conn)
        if opcode == 8:
            send_frame(conn, 8, body[:2])
            return
        if opcode == 9:
            send_frame(conn, 10, body)
            continue
        msg = json.loads(body.decode())
        kind = msg.get("type")
        if kind == "close":
            return
        if kind == "reset":
            steps = 0
            data = {"observation": {"echoed": "ready", "python": sys.version.split()[0]},
                    "reward": None, "done": False}
        elif kind == "step":
            steps += 1
            text = str((msg.get("data") or {}).get("text", ""))
            data = {"observation": {"echoed": text}, "reward": float(len(text)), "done": False}
        else:
            data = {"step_count": steps, "cwd": os.getcwd()}
        send_frame(conn, 1, json.dumps({"type": kind, "data": data}).encode())


def serve(conn):
    try:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(4096)
            if not chunk:
                return
            request += chunk
        lines = request.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
        headers = {k.lower(): v for k, v in headers.items()}
        if path == "/health":
            body = b'{"status": "healthy"}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            return
        if path == "/ws" and "sec-websocket-key" in headers:
            key = headers["sec-websocket-key"].strip() + GUID
            accept = base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()
            conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
            episode(conn)
            return
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except (EOFError, OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(16)
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main()
"""
