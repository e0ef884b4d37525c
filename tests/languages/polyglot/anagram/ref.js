const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/);
const key = (w) => [...w].sort().join("");
console.log(key(a) === key(b) ? "YES" : "NO");
