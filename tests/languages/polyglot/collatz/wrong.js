let n = Number(require("fs").readFileSync(0, "utf8").trim());
let steps = 1;
while (n !== 1) {
  n = n % 2 === 0 ? n / 2 : 3 * n + 1;
  steps++;
}
console.log(String(steps));
