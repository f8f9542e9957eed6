// Raw bytes to and from a server under test, for what fetch() would not send (hostile heads,
// half requests, pipelining, half-closes), and the process figures the suites check.
import net from 'node:net';
import fs from 'node:fs';

// Sends `bytes` on a new connection to 127.0.0.1:port (then half-closes when `end`); resolves
// with everything the server sent until it closed, or until `untilMs` passed (then the socket
// is destroyed).
export function raw(port, bytes, { untilMs = 15_000, end = false } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks = [];
    const timer = setTimeout(() => sock.destroy(), untilMs);
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', () => {});
    sock.on('close', () => { clearTimeout(timer); resolve(Buffer.concat(chunks).toString('latin1')); });
    sock.on('connect', () => { if (end) sock.end(bytes); else sock.write(bytes); });
  });
}

// The status code of a raw HTTP/1.1 reply, -1 when there is none.
export const statusOf = (reply) => Number(/^HTTP\/1\.1 (\d{3}) /.exec(reply)?.[1] ?? -1);

// The resident size of a process, in bytes.
export function rssBytes(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) * 1024;
}
