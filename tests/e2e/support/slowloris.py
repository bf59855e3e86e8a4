# Holds COUNT connections to 127.0.0.1:PORT for SECONDS, each sending half a request and then one
# header line a second (never the blank line that ends the header); a connection the server
# closes is opened again at once. Prints how many connections were opened in all.
import resource, selectors, socket, sys, time

port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (count + 256, count + 256))
opened = 0

def connect():
    global opened
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    opened += 1
    return [s, False]

conns = [connect() for _ in range(count)]
end = time.time() + seconds
while time.time() < end:
    for i, c in enumerate(conns):
        s, started = c
        try:
            s.send(b"X-Slow: 1\r\n" if started else b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
            c[1] = True
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            conns[i] = connect()
    time.sleep(1)
print(opened)
