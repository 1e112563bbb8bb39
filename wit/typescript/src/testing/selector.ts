/**
 * Kubernetes label selectors as the API server (and the embedded server's
 * `kube-rules`) evaluates them: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
 * `a notin (x)`, `a`, `!a`, `a>1`, `a<9`. A port of
 * `kube-rules/src/selector.rs`, so the World admits exactly the objects a
 * watch would hold. Parsing errors are exceptions with the server's wording.
 * @module
 */

type Req =
  | { op: "eq" | "neq"; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "notexists"; key: string }
  | { op: "gt" | "lt"; key: string; n: number };

function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

function validKey(k: string): boolean {
  return k.length > 0 && k.length <= 317 && /^[A-Za-z0-9\-_./]+$/.test(k);
}

function integer(s: string): number | undefined {
  return /^[+-]?\d+$/.test(s.trim()) ? Number(s.trim()) : undefined;
}

/** A parsed label selector; the empty selector matches everything. */
export class LabelSelector {
  private constructor(private readonly reqs: Req[]) {}

  /** Parses `s`; throws `unable to parse requirement: PART` when malformed. */
  static parse(s: string): LabelSelector {
    const reqs: Req[] = [];
    if (s.trim() === "") return new LabelSelector(reqs);
    for (const raw of splitTopLevel(s)) {
      const part = raw.trim();
      const fail = () => new Error(`unable to parse requirement: ${part}`);
      const checked = (k: string) => {
        if (!validKey(k.trim())) throw fail();
        return k.trim();
      };
      const split = (sep: string): [string, string] | undefined => {
        const at = part.indexOf(sep);
        return at < 0 ? undefined : [part.slice(0, at), part.slice(at + sep.length)];
      };
      let kv: [string, string] | undefined;
      if (part.startsWith("!")) {
        reqs.push({ op: "notexists", key: checked(part.slice(1)) });
      } else if (part.includes("(")) {
        const open = part.indexOf("(");
        const close = part.lastIndexOf(")");
        if (close < open || part.slice(close + 1).trim() !== "") throw fail();
        const head = part.slice(0, open).trim().split(/\s+/);
        const values = part
          .slice(open + 1, close)
          .split(",")
          .map((v) => v.trim())
          .filter((v) => v !== "");
        const [key, op] = head;
        if (head.length !== 2 || key === undefined || !validKey(key) || (op !== "in" && op !== "notin")) throw fail();
        reqs.push({ op, key, values });
      } else if ((kv = split("!="))) {
        reqs.push({ op: "neq", key: checked(kv[0]), value: kv[1].trim() });
      } else if ((kv = split("=="))) {
        reqs.push({ op: "eq", key: checked(kv[0]), value: kv[1].trim() });
      } else if ((kv = split("="))) {
        reqs.push({ op: "eq", key: checked(kv[0]), value: kv[1].trim() });
      } else if ((kv = split(">")) || (kv = split("<"))) {
        const n = integer(kv[1]);
        if (n === undefined) throw fail();
        reqs.push({ op: part.includes(">") ? "gt" : "lt", key: checked(kv[0]), n });
      } else {
        reqs.push({ op: "exists", key: checked(part) });
      }
    }
    return new LabelSelector(reqs);
  }

  /** Whether an object with `labels` satisfies every requirement. */
  matches(labels: ReadonlyMap<string, string>): boolean {
    return this.reqs.every((r) => {
      const l = labels.get(r.key);
      switch (r.op) {
        case "eq":
          return l === r.value;
        case "neq":
          return l !== r.value;
        case "in":
          return l !== undefined && r.values.includes(l);
        case "notin":
          return !(l !== undefined && r.values.includes(l));
        case "exists":
          return l !== undefined;
        case "notexists":
          return l === undefined;
        case "gt":
        case "lt": {
          const n = l === undefined ? undefined : integer(l);
          return n !== undefined && (r.op === "gt" ? n > r.n : n < r.n);
        }
      }
    });
  }
}
