# An admission webhook that is overloaded, as a policy engine under load can be: it answers every
# AdmissionReview on https://127.0.0.1:PORT with "denied, 429 Too Many Requests", which the
# kube-apiserver hands to the client as HTTP 429 (what API Priority and Fairness answers too).
# Counts the reviews it answered on stdout, one line each.
# Usage: busy_webhook.py PORT CERT KEY
import http.server, json, ssl, sys

port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]

class Busy(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": False,
                         "status": {"code": 429, "message": "busy-webhook: too many requests"}},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        print("review", flush=True)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Busy)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
server.serve_forever()
