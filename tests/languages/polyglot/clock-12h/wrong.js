const [hh, mm] = require("fs").readFileSync(0, "utf8").trim().split(":");
const h = Number(hh);
console.log(`${h <= 12 ? h : h - 12}:${mm} ${h < 12 ? "AM" : "PM"}`);
