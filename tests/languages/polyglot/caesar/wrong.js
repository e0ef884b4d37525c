const [first, line] = require("fs").readFileSync(0, "utf8").split("\n");
const k = Number(first);
const out = [...line].map((ch) => {
  const c = ch.charCodeAt(0);
  return ch === " " ? ch : String.fromCharCode(c + k);
});
console.log(out.join(""));
