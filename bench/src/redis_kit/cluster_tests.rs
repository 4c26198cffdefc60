use super::*;

#[test]
fn cluster_nodes_lines_parse() {
    let text = "07c3 127.0.0.1:30004@31004,host slave e7d1 0 1426238317239 4 connected\n\
                    67ed 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 12000 [93-<-292f]\n\
                    292f 127.0.0.1:30003@31003 master,fail - 0 0 3 disconnected\n";
    let nodes = parse_nodes(text);
    assert_eq!(nodes.len(), 3);
    assert!(!nodes[0].primary && nodes[0].port == 30004);
    assert_eq!(nodes[1].slots, vec![(5461, 10922), (12000, 12000)]);
    assert!(nodes[2].failed && nodes[2].primary);
    assert_eq!(owner_in(&nodes, 12000), Some(30002));
}
