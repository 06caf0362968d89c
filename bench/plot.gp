# bench/plot.gp: one workload of timer_bench's results, a value against N per system, log-log.
# Called by scripts/bench.sh, once per workload:
#   gnuplot -e "csv='bench/results/latest.csv'; w='fire'; col=4; systems='asio tock_timer heap'; \
#               ylabel='CPU ns per timer'; out='bench/results/fire.png'" bench/plot.gp
# col: 4 = ns_per_op, 5 = bytes_per_timer (columns of the CSV).
set terminal pngcairo size 900,600 noenhanced font ",11"
set output out
set title sprintf("%s: %s against N", w, ylabel)
set xlabel "N (pending timers)"
set ylabel ylabel
set logscale xy 10
set format x "%.0s%c"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key outside right top
set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05
data(s) = sprintf("< awk -F, -v w=%s -v s=%s '$1==w && $2==s && $%d != \"\" {print $3, $%d}' %s", w, s, col, col, csv)
plot for [s in systems] data(s) using 1:2 with linespoints lw 2 pt 7 ps 1.2 title s
