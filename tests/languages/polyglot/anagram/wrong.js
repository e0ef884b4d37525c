const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/);
const key = (w) => [...new Set(w)].sort().join("");
console.log(a.length === b.length && key(a) === key(b) ? "YES" : "NO");
