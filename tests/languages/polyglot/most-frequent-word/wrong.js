const words = require("fs").readFileSync(0, "utf8").trim().split(/\s+/);
const counts = new Map();
for (const w of words) counts.set(w, (counts.get(w) || 0) + 1);
let best = null;
for (const [w, c] of counts) {
  if (best === null || c > counts.get(best)) best = w;
}
console.log(best);
