let n = Number(require("fs").readFileSync(0, "utf8").trim());
const values = [1000, 500, 100, 50, 10, 5, 1];
const symbols = ["M", "D", "C", "L", "X", "V", "I"];
let out = "";
values.forEach((v, i) => {
  while (n >= v) {
    out += symbols[i];
    n -= v;
  }
});
console.log(out);
