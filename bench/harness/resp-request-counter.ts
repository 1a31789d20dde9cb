/**
 * Counts the requests in a client-to-Redis byte stream, fed chunk by chunk as it crosses a
 * proxy: each RESP array of bulk strings (`*N`, then N times `$len` + bytes) is one command,
 * and so is an inline command line. Headers are parsed, bulk bodies skipped by length, so a
 * `*` or a newline inside a key or script argument is never miscounted. Commands a script runs
 * inside Redis never cross the wire: this is what the client asked, round trips and pipelined
 * commands alike.
 */
export class RespRequestCounter {
  /** Complete commands seen so far. */
  count = 0;
  /** A header line cut by a chunk boundary. */
  private partial = '';
  /** Bulk body bytes (with their CRLF) still to skip. */
  private skip = 0;
  /** Bulk strings still to come in the current command. */
  private elements = 0;

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - i);
        this.skip -= n;
        i += n;
        if (this.skip === 0 && this.elements === 0) this.count++;
        continue;
      }
      const newline = chunk.indexOf(10, i);
      if (newline < 0) {
        this.partial += chunk.toString('latin1', i);
        return;
      }
      const raw = this.partial + chunk.toString('latin1', i, newline);
      this.partial = '';
      i = newline + 1;
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (this.elements === 0) {
        if (line.startsWith('*')) {
          this.elements = Number(line.slice(1));
          if (!(this.elements > 0)) this.elements = 0; // an empty array: nothing to run
        } else if (line.length > 0) {
          this.count++; // inline command
        }
      } else {
        if (!line.startsWith('$'))
          throw new Error(`not a RESP bulk string header: ${line.slice(0, 20)}`);
        this.elements--;
        this.skip = Number(line.slice(1)) + 2;
      }
    }
  }
}
